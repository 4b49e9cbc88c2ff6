package metadata

import (
	"fmt"
	"slices"
	"sort"
)

// PlacementBroker is a broker placement may use (the controller passes the
// unfenced ones).
type PlacementBroker struct {
	ID   int32
	Rack string // "" when racks are not configured
}

// PlacementRequest asks for replica lists for Partitions new partitions.
type PlacementRequest struct {
	Brokers           []PlacementBroker
	Partitions        int
	ReplicationFactor int
	// LeaderCounts is the number of partitions each broker already is the
	// preferred leader of (Image.LeaderCounts), so leaders balance across
	// topics, not only within this one. May be nil.
	LeaderCounts map[int32]int
	// ReplicaCounts is the number of replicas each broker already holds.
	// May be nil.
	ReplicaCounts map[int32]int
}

// Place assigns replicas greedily, one partition at a time:
//   - the preferred leader (first replica) is the broker leading the fewest
//     partitions, then holding the fewest replicas;
//   - each follower comes from a rack this partition does not use yet when
//     one is left (rack awareness), then from the least loaded broker;
//   - remaining ties go to the next broker after the previous partition's
//     leader in a rack-alternating order, so equal brokers take turns.
//
// Place is deterministic: equal requests give equal placements.
func Place(req PlacementRequest) ([][]int32, error) {
	if req.Partitions <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidPartitions, req.Partitions)
	}
	if req.ReplicationFactor <= 0 || req.ReplicationFactor > len(req.Brokers) {
		return nil, fmt.Errorf("%w: %d with %d available brokers", ErrInvalidReplication, req.ReplicationFactor, len(req.Brokers))
	}
	order := rackAlternating(req.Brokers)
	pos := make(map[int32]int, len(order))
	rack := make(map[int32]string, len(order))
	for i, b := range order {
		pos[b.ID] = i
		rack[b.ID] = b.Rack
	}
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, b := range order {
		leaders[b.ID] = req.LeaderCounts[b.ID]
		replicas[b.ID] = req.ReplicaCounts[b.ID]
	}
	n := len(order)
	cursor := 0
	// dist is how far id lies after the cursor in the rotation.
	dist := func(id int32) int { return (pos[id] - cursor + n) % n }
	out := make([][]int32, 0, req.Partitions)
	for range req.Partitions {
		reps := make([]int32, 0, req.ReplicationFactor)
		usedRacks := map[string]bool{}
		best := func(less func(a, b int32) bool) int32 {
			var pick int32 = NoLeader
			for _, b := range order {
				if slices.Contains(reps, b.ID) {
					continue
				}
				if pick == NoLeader || less(b.ID, pick) {
					pick = b.ID
				}
			}
			return pick
		}
		leader := best(func(a, b int32) bool {
			if leaders[a] != leaders[b] {
				return leaders[a] < leaders[b]
			}
			if replicas[a] != replicas[b] {
				return replicas[a] < replicas[b]
			}
			return dist(a) < dist(b)
		})
		reps = append(reps, leader)
		usedRacks[rack[leader]] = true
		for len(reps) < req.ReplicationFactor {
			f := best(func(a, b int32) bool {
				na, nb := usedRacks[rack[a]], usedRacks[rack[b]]
				if na != nb {
					return !na
				}
				if replicas[a] != replicas[b] {
					return replicas[a] < replicas[b]
				}
				// Start followers after the leader so neighbours differ
				// from partition to partition.
				return (pos[a]-pos[leader]+n)%n < (pos[b]-pos[leader]+n)%n
			})
			reps = append(reps, f)
			usedRacks[rack[f]] = true
		}
		leaders[leader]++
		for _, r := range reps {
			replicas[r]++
		}
		cursor = (pos[leader] + 1) % n
		out = append(out, reps)
	}
	return out, nil
}

// rackAlternating orders brokers so that neighbours sit in different racks
// when possible: the first broker of each rack, then the second of each...
// Racks and brokers within a rack are sorted for determinism.
func rackAlternating(bs []PlacementBroker) []PlacementBroker {
	byRack := map[string][]PlacementBroker{}
	for _, b := range bs {
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	racks := make([]string, 0, len(byRack))
	for r, l := range byRack {
		racks = append(racks, r)
		sort.Slice(l, func(i, j int) bool { return l[i].ID < l[j].ID })
	}
	sort.Strings(racks)
	out := make([]PlacementBroker, 0, len(bs))
	for i := 0; len(out) < len(bs); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// ReplicaCounts returns how many replicas each broker holds.
func (im *Image) ReplicaCounts() map[int32]int {
	out := map[int32]int{}
	for _, t := range im.topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				out[r]++
			}
		}
	}
	return out
}
