package harness

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func CreateTopicWith(t *testing.T, adm *kadm.Client, name string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(Context(t, 30*time.Second), partitions, rf, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}
