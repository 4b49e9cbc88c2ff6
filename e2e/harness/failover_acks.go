package harness

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// EnvRepeats reads a repetition count from the environment (default 1).
func EnvRepeats(t *testing.T, name string) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q", name, s)
	}
	return n
}

// PartitionLeader waits until partition p of topic has a leader and
// returns it.
func PartitionLeader(t *testing.T, adm *kadm.Client, topic string, partitions int, p int32) int32 {
	t.Helper()
	m := WaitMetadata(t, adm, 30*time.Second, "a leader", func(m kadm.Metadata) bool {
		return len(m.Topics[topic].Partitions) == partitions && m.Topics[topic].Partitions[p].Leader >= 0
	})
	return m.Topics[topic].Partitions[p].Leader
}
