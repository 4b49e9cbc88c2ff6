package harness

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Eventually polls cond until it holds, failing the test with cond's last
// description of the state after limit.
func Eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not after %v: %s", what, limit, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// EndOffsets is listedEnds by partition.
func EndOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	ListedEnds(t, adm, topic).Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}
