package harness

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// StartVoterCluster starts len(racks) nodes, the first voters of them
// controller voters and the rest brokers that follow the metadata log as
// raft non-voters; racks[i] is node i+1's --rack ("" for none). extra is
// added to every node's flags.
func StartVoterCluster(t *testing.T, voters int, racks []string, extra ...string) *Cluster {
	t.Helper()
	return StartClusterAt(t, FreshNodeSpecs(t, len(racks)), voters, func(i int) []string {
		flags := slices.Clone(extra)
		if racks[i] != "" {
			flags = append(flags, "--rack", racks[i])
		}
		return flags
	})
}

// FreshMetadata keeps kgo from answering kadm's Metadata from its cache
// (MetadataMinAge, 5 s by default), which would delay every poll below.
var FreshMetadata = kgo.MetadataMinAge(100 * time.Millisecond)
