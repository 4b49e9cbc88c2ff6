package harness

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// NftTable is the bridge table the fault rules live in.
const NftTable = "rlfault"

var NftCounterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ .*comment "([^"]+)"`)

// MetadataWhole reports whether resp shows every partition of the given
// topics (name -> partition count) with a leader and 3 replicas in sync.
func MetadataWhole(resp *kmsg.MetadataResponse, want map[string]int) bool {
	seen := 0
	for _, t := range resp.Topics {
		if t.Topic == nil {
			return false
		}
		n, ok := want[*t.Topic]
		if !ok || t.ErrorCode != 0 || len(t.Partitions) != n {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		seen++
	}
	return seen == len(want)
}
