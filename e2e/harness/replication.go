package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const ReplicaLag = 3 * time.Second

// StartReplCluster starts n voter+broker nodes like startCluster, with a
// short replica.lag.time.max and extra flags.
func StartReplCluster(t *testing.T, n int, extra ...string) *Cluster {
	t.Helper()
	return StartReplClusterAt(t, FreshNodeSpecs(t, n), extra...)
}

// StartReplClusterAt is startReplCluster on explicit addresses: node i+1
// listens where specs[i] says.
func StartReplClusterAt(t *testing.T, specs []NodeSpec, extra ...string) *Cluster {
	t.Helper()
	flags := append([]string{"--replica-lag-time-max", ReplicaLag.String()}, extra...)
	return StartClusterAt(t, specs, len(specs), func(int) []string { return flags })
}

// CreateRF3Topic creates topic with partitions partitions, RF=3 and
// min.insync.replicas=2, and waits until every partition has a leader and
// a full ISR.
func CreateRF3Topic(t *testing.T, adm *kadm.Client, topic string, partitions int) kadm.Metadata {
	t.Helper()
	resp, err := adm.CreateTopic(Context(t, 30*time.Second), int32(partitions), 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return WaitMetadata(t, adm, 30*time.Second, "full ISRs", FullISR(topic, partitions))
}

// FullISR is a waitMetadata condition: every partition of topic has a
// leader and all three replicas in its ISR.
func FullISR(topic string, partitions int) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool {
		td := m.Topics[topic]
		if len(td.Partitions) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	}
}

// SegmentBytes reads a partition's first segment file on one node.
func SegmentBytes(b *BrokerProc, topic string, p int32) []byte {
	data, _ := os.ReadFile(filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, p), "00000000000000000000.log"))
	return data
}
