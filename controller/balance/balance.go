// Package balance plans replica moves: a balanced placement after brokers
// join, and the moves that empty brokers being decommissioned. It is pure
// (no I/O, no clock, no randomness): `ringlog admin` feeds it the cluster
// it read through Metadata and applies the plan with
// AlterPartitionReassignments; equal inputs give equal plans.
//
// The plan is built in three passes over a copy of every replica list:
//  1. evacuate: each replica on an excluded broker moves to an eligible
//     broker (rack rule first, then fewest replicas, then lowest id);
//  2. replicas: while a broker holds more than ceil(mean) replicas or fewer
//     than floor(mean), one replica moves from the most to the least loaded
//     broker that can take it. Each such move is needed by any balanced
//     result, so the number of moves is the minimum (without racks:
//     max(excess over ceil, deficit under floor));
//  3. leaders: while a broker is the preferred leader (Replicas[0]) of more
//     than ceil(partitions/brokers) partitions or fewer than floor, the
//     replica lists of partitions it leads are reordered so that an
//     under-loaded replica comes first. No data moves for a reorder.
//
// Rack rule: a move never lowers the number of distinct racks a partition
// spans, and prefers a broker on a rack the partition does not use yet.
package balance

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrCannotPlace is returned when the eligible brokers cannot hold a
// partition's replicas (replication factor or rack rule).
var ErrCannotPlace = errors.New("balance: cannot place replicas")

// Broker is a broker the plan may use.
type Broker struct {
	ID   int32
	Rack string // "" when racks are not configured
	// Excluded brokers (decommissioning) must end with no replicas.
	Excluded bool
}

// Partition is one partition's current assignment; Replicas[0] is its
// preferred leader.
type Partition struct {
	Topic    string
	Index    int32
	Replicas []int32
}

// Move is one partition whose replica list changes.
type Move struct {
	Topic    string
	Index    int32
	From, To []int32
}

// Moved is the number of replicas that change broker (a pure reorder, which
// only balances leaders, moves none).
func (m Move) Moved() int {
	n := 0
	for _, b := range m.To {
		if !slices.Contains(m.From, b) {
			n++
		}
	}
	return n
}

// Counts is a broker's load.
type Counts struct{ Replicas, Leaders int }

// Plan is the outcome of Compute.
type Plan struct {
	Moves []Move // sorted by topic, partition
	// Before and After are per broker (every input broker, plus brokers
	// that appear only in replica lists).
	Before, After map[int32]Counts
	// ReplicasMoved is the sum of Moved over Moves.
	ReplicasMoved int
}

// Compute plans the moves for brokers and partitions. Replicas on brokers
// missing from brokers (not registered, or not reported live) stay where
// they are, and such brokers take no new replicas: a broker that is down
// for a moment must not be emptied by a rebalance.
func Compute(brokers []Broker, parts []Partition) (Plan, error) {
	p, err := newPlanner(brokers, parts)
	if err != nil {
		return Plan{}, err
	}
	before := p.counts()
	if err := p.evacuate(); err != nil {
		return Plan{}, err
	}
	p.balanceReplicas()
	p.balanceLeaders()
	out := Plan{Before: before, After: p.counts()}
	for i, pt := range p.parts {
		if !slices.Equal(pt.Replicas, p.target[i]) {
			m := Move{Topic: pt.Topic, Index: pt.Index, From: slices.Clone(pt.Replicas), To: slices.Clone(p.target[i])}
			out.ReplicasMoved += m.Moved()
			out.Moves = append(out.Moves, m)
		}
	}
	return out, nil
}

type planner struct {
	ids      []int32 // eligible brokers, ascending
	eligible map[int32]bool
	excluded map[int32]bool
	known    map[int32]bool
	rack     map[int32]string
	parts    []Partition // sorted by topic, index
	target   [][]int32   // working replica lists, parallel to parts
	replicas map[int32]int
	// nextLeader is scratch for leaderPath: the broker each partition on
	// the chosen path hands its leadership to.
	nextLeader map[int]int32
}

func newPlanner(brokers []Broker, parts []Partition) (*planner, error) {
	p := &planner{
		eligible: map[int32]bool{}, excluded: map[int32]bool{}, known: map[int32]bool{},
		rack: map[int32]string{}, replicas: map[int32]int{}, nextLeader: map[int]int32{},
	}
	for _, b := range brokers {
		if p.known[b.ID] {
			return nil, fmt.Errorf("balance: broker %d listed twice", b.ID)
		}
		p.known[b.ID] = true
		p.rack[b.ID] = b.Rack
		if b.Excluded {
			p.excluded[b.ID] = true
		} else {
			p.eligible[b.ID] = true
			p.ids = append(p.ids, b.ID)
		}
	}
	slices.Sort(p.ids)
	p.parts = slices.Clone(parts)
	sort.Slice(p.parts, func(i, j int) bool {
		a, b := p.parts[i], p.parts[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Index < b.Index
	})
	maxRF := 0
	for i, pt := range p.parts {
		if i > 0 && p.parts[i-1].Topic == pt.Topic && p.parts[i-1].Index == pt.Index {
			return nil, fmt.Errorf("balance: partition %s-%d listed twice", pt.Topic, pt.Index)
		}
		for j, r := range pt.Replicas {
			if slices.Contains(pt.Replicas[:j], r) {
				return nil, fmt.Errorf("balance: partition %s-%d lists broker %d twice", pt.Topic, pt.Index, r)
			}
		}
		maxRF = max(maxRF, len(pt.Replicas))
		p.target = append(p.target, slices.Clone(pt.Replicas))
		for _, r := range pt.Replicas {
			p.replicas[r]++
		}
	}
	if len(p.excluded) > 0 && maxRF > len(p.ids) {
		return nil, fmt.Errorf("%w: the largest replication factor is %d but only %d brokers would remain (%v)", ErrCannotPlace, maxRF, len(p.ids), p.ids)
	}
	return p, nil
}

func (p *planner) counts() map[int32]Counts {
	out := map[int32]Counts{}
	for id := range p.known {
		out[id] = Counts{}
	}
	for _, reps := range p.target {
		for i, r := range reps {
			c := out[r]
			c.Replicas++
			if i == 0 {
				c.Leaders++
			}
			out[r] = c
		}
	}
	return out
}

// racks returns the distinct racks of reps, skipping index skip (-1: none).
func (p *planner) racks(reps []int32, skip int) map[string]bool {
	out := map[string]bool{}
	for i, r := range reps {
		if i != skip {
			out[p.rack[r]] = true
		}
	}
	return out
}

// rackOK reports whether replacing reps[at] with b keeps (or raises) the
// number of distinct racks, and whether b's rack is new to the partition.
func (p *planner) rackOK(reps []int32, at int, b int32) (ok, spreads bool) {
	others := p.racks(reps, at)
	before := len(others)
	if !others[p.rack[reps[at]]] {
		before++
	}
	after := len(others)
	if !others[p.rack[b]] {
		after++
	}
	return after >= before, !others[p.rack[b]]
}

func (p *planner) move(i, at int, to int32) {
	p.replicas[p.target[i][at]]--
	p.replicas[to]++
	p.target[i][at] = to
}

// evacuate moves every replica off excluded brokers.
func (p *planner) evacuate() error {
	for i := range p.target {
		for at := 0; at < len(p.target[i]); at++ {
			if !p.excluded[p.target[i][at]] {
				continue
			}
			best, bestSpread := int32(-1), false
			for _, b := range p.ids {
				if slices.Contains(p.target[i], b) {
					continue
				}
				ok, spreads := p.rackOK(p.target[i], at, b)
				if !ok {
					continue
				}
				if best < 0 || spreads && !bestSpread ||
					spreads == bestSpread && p.replicas[b] < p.replicas[best] {
					best, bestSpread = b, spreads
				}
			}
			if best < 0 {
				pt := p.parts[i]
				return fmt.Errorf("%w: %s-%d (replicas %v): no remaining broker can take the replica on broker %d without reducing the racks it spans",
					ErrCannotPlace, pt.Topic, pt.Index, pt.Replicas, p.target[i][at])
			}
			p.move(i, at, best)
		}
	}
	return nil
}

// bounds returns floor and ceil of total/n.
func bounds(total, n int) (lo, hi int) {
	if n == 0 {
		return 0, 0
	}
	lo = total / n
	hi = lo
	if total%n != 0 {
		hi++
	}
	return lo, hi
}

// byLoad returns the eligible brokers ordered by count, descending when
// desc, ties by id.
func (p *planner) byLoad(count map[int32]int, desc bool) []int32 {
	out := slices.Clone(p.ids)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := count[out[i]], count[out[j]]
		if a != b {
			return a > b == desc
		}
		return out[i] < out[j]
	})
	return out
}

func (p *planner) balanceReplicas() {
	total := 0
	for _, b := range p.ids {
		total += p.replicas[b]
	}
	lo, hi := bounds(total, len(p.ids))
	// Every move lowers the sum of squared counts, so this ends; the
	// bound is a guard against a bug, not a limit in practice.
	for guard := 0; guard <= total*len(p.ids)+1; guard++ {
		if !p.replicaStep(lo, hi) {
			return
		}
	}
}

// replicaStep makes one improving move; false when none is possible.
func (p *planner) replicaStep(lo, hi int) bool {
	for _, d := range p.byLoad(p.replicas, true) {
		for _, r := range p.byLoad(p.replicas, false) {
			cd, cr := p.replicas[d], p.replicas[r]
			if cd-cr < 2 {
				break // receivers only get more loaded from here
			}
			if cd <= hi && cr >= lo {
				continue
			}
			if i, at := p.pickReplica(d, r); i >= 0 {
				p.move(i, at, r)
				return true
			}
		}
	}
	return false
}

// pickReplica chooses a partition whose replica on d may move to r: r must
// not hold it and the rack rule must hold. Partitions where the move
// spreads racks come first, then those d does not lead (so leadership moves
// less), then the first in order.
func (p *planner) pickReplica(d, r int32) (int, int) {
	bestI, bestAt, bestScore := -1, -1, -1
	for i, reps := range p.target {
		at := slices.Index(reps, d)
		if at < 0 || slices.Contains(reps, r) {
			continue
		}
		ok, spreads := p.rackOK(reps, at, r)
		if !ok {
			continue
		}
		score := 0
		if spreads && !p.racks(reps, -1)[p.rack[r]] {
			score += 2
		}
		if at != 0 {
			score++
		}
		if score > bestScore {
			bestI, bestAt, bestScore = i, at, score
		}
	}
	return bestI, bestAt
}

func (p *planner) balanceLeaders() {
	leaders := map[int32]int{}
	n := 0
	for _, reps := range p.target {
		if len(reps) > 0 {
			leaders[reps[0]]++
			n++
		}
	}
	lo, hi := bounds(n, len(p.ids))
	for guard := 0; guard <= n*len(p.ids)+1; guard++ {
		if !p.leaderStep(leaders, lo, hi) {
			return
		}
	}
}

// leaderStep moves one preferred leadership from an over-loaded broker to
// an under-loaded one. When no partition led by the donor has the receiver
// as a replica, leadership shifts along a chain d -> b1 -> ... -> r (each
// step a partition led by one broker that the next replicates), which
// leaves the brokers in between with their counts.
func (p *planner) leaderStep(leaders map[int32]int, lo, hi int) bool {
	for _, d := range p.byLoad(leaders, true) {
		path := p.leaderPath(d, leaders, lo, hi)
		if path == nil {
			continue
		}
		for _, i := range path {
			reps := p.target[i]
			from := reps[0]
			k := slices.Index(reps, p.nextLeader[i])
			reps[0], reps[k] = reps[k], reps[0]
			leaders[from]--
			leaders[reps[0]]++
		}
		return true
	}
	return false
}

// leaderPath searches breadth-first from d for the least-led broker r with
// leaders[d]-leaders[r] >= 2 (and d above ceil or r below floor); it
// returns the partitions to reorder, in order, with p.nextLeader set.
func (p *planner) leaderPath(d int32, leaders map[int32]int, lo, hi int) []int {
	type hop struct {
		prev int32
		part int
	}
	edges := p.leaderEdges()
	from := map[int32]hop{d: {prev: -1, part: -1}}
	queue := []int32{d}
	best := int32(-1)
	for len(queue) > 0 {
		b := queue[0]
		queue = queue[1:]
		for _, c := range p.ids {
			if _, seen := from[c]; seen {
				continue
			}
			i, ok := edges[[2]int32{b, c}]
			if !ok {
				continue
			}
			from[c] = hop{prev: b, part: i}
			queue = append(queue, c)
			cd, cc := leaders[d], leaders[c]
			if cd-cc >= 2 && (cd > hi || cc < lo) && (best < 0 || cc < leaders[best]) {
				best = c
			}
		}
	}
	if best < 0 {
		return nil
	}
	var path []int
	for c := best; c != d; c = from[c].prev {
		h := from[c]
		p.nextLeader[h.part] = c
		path = append(path, h.part)
	}
	slices.Reverse(path)
	return path
}

// leaderEdges maps (leader, replica) to a partition led by the first that
// the second replicates, preferring one the plan changes already (its
// reorder then costs no extra reassignment), then the first in order.
func (p *planner) leaderEdges() map[[2]int32]int {
	edges := map[[2]int32]int{}
	for i, reps := range p.target {
		if len(reps) == 0 {
			continue
		}
		changed := !slices.Equal(p.parts[i].Replicas, reps)
		for _, r := range reps[1:] {
			k := [2]int32{reps[0], r}
			j, ok := edges[k]
			if !ok || changed && slices.Equal(p.parts[j].Replicas, p.target[j]) {
				edges[k] = i
			}
		}
	}
	return edges
}

// Summary renders the plan for people: per-broker counts before and after
// and the number of moves.
func (pl Plan) Summary() string {
	var sb strings.Builder
	ids := make([]int32, 0, len(pl.After))
	for id := range pl.After {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fmt.Fprintf(&sb, "%-8s %16s %16s\n", "broker", "replicas", "leaders")
	for _, id := range ids {
		b, a := pl.Before[id], pl.After[id]
		fmt.Fprintf(&sb, "%-8d %7d -> %-6d %7d -> %-6d\n", id, b.Replicas, a.Replicas, b.Leaders, a.Leaders)
	}
	reorders := 0
	for _, m := range pl.Moves {
		if m.Moved() == 0 {
			reorders++
		}
	}
	fmt.Fprintf(&sb, "%d partitions change: %d replicas move, %d only reorder (preferred leader)\n",
		len(pl.Moves), pl.ReplicasMoved, reorders)
	return sb.String()
}
