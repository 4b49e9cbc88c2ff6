package harness

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ListedEnds lists topic's end offsets through kadm, which does not retry
// a partition's retriable error (OFFSET_NOT_AVAILABLE from a leader just
// elected, NOT_LEADER_OR_FOLLOWER) but returns it with offset -1; a reader
// taking that as the end would stop short. It asks again, for up to 30 s,
// until every partition answers.
func ListedEnds(t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(Context(t, 10*time.Second), topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			return ends
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
