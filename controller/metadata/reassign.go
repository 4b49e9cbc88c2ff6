package metadata

import (
	"fmt"
	"slices"
)

// Partition reassignment (KIP-455, as KRaft's ReplicationControlManager
// runs it). Starting one widens the replica set to target plus original;
// the adding replicas catch up through the ordinary follower path and are
// put in the ISR by the leader's AlterPartition; the apply that makes the
// last adding replica in-sync also completes the reassignment: Replicas
// becomes the target, the removing replicas leave the ISR, and leadership
// moves off a removed leader. Every step is a deterministic function of
// the image, so the whole state machine is in the raft log.

// AlterPartitionReassignments starts, replaces or cancels reassignments;
// each item's outcome is in Result.ItemErrs (a refused item changes
// nothing, the others still apply).
type AlterPartitionReassignments struct {
	Items []ReassignmentItem
}

// ReassignmentItem is one partition's new target replicas, or Cancel.
type ReassignmentItem struct {
	Topic     string
	Partition int32
	// Replicas is the target assignment, preferred leader first; ignored
	// with Cancel.
	Replicas []int32 `json:",omitempty"`
	// Cancel reverts an ongoing reassignment (Kafka's null replicas).
	Cancel bool `json:",omitempty"`
}

// Reassignment is one partition in reassignment, as ListPartitionReassignments
// reports it.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// Reassignments returns the partitions in reassignment, by topic then
// partition.
func (im *Image) Reassignments() []Reassignment {
	var out []Reassignment
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			if p.Reassigning() {
				out = append(out, Reassignment{Topic: t.Name, Partition: int32(i),
					Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
			}
		}
	}
	return out
}

func (t *txn) alterReassignments(c *AlterPartitionReassignments) Result {
	res := Result{ItemErrs: make([]error, len(c.Items))}
	for i, it := range c.Items {
		res.ItemErrs[i] = t.reassign(it)
	}
	return res
}

func (t *txn) reassign(it ReassignmentItem) error {
	tp, ok := t.im.topics[it.Topic]
	if !ok || it.Partition < 0 || int(it.Partition) >= len(tp.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, it.Topic, it.Partition)
	}
	p := tp.Partitions[it.Partition].clone()
	if it.Cancel {
		if !p.Reassigning() {
			return fmt.Errorf("%w: %s-%d", ErrNoReassignment, it.Topic, it.Partition)
		}
		t.revert(&p)
	} else {
		if err := t.validTarget(it.Replicas); err != nil {
			return fmt.Errorf("%s-%d: %w", it.Topic, it.Partition, err)
		}
		startReassignment(&p, it.Replicas)
		t.maybeComplete(&p)
	}
	p.PartitionEpoch++
	t.replacePartition(tp, it.Partition, p)
	return nil
}

// validTarget checks a target replica list as Kafka does: non-empty, no
// duplicates, every broker registered and unfenced.
func (t *txn) validTarget(reps []int32) error {
	if len(reps) == 0 {
		return fmt.Errorf("%w: empty target replicas", ErrInvalidAssignment)
	}
	for j, r := range reps {
		if slices.Contains(reps[:j], r) {
			return fmt.Errorf("%w: broker %d twice in %v", ErrInvalidAssignment, r, reps)
		}
		if b, ok := t.im.brokers[r]; !ok || b.Fenced {
			return fmt.Errorf("%w: broker %d is not registered or is fenced", ErrInvalidAssignment, r)
		}
	}
	return nil
}

// startReassignment moves p towards target. The current replica set is
// the whole Replicas (original plus any adding replicas of a reassignment
// in progress), as in KRaft: a replacement target keeps what was already
// copied only if it names it.
func startReassignment(p *Partition, target []int32) {
	cur := p.Replicas
	var adding, removing []int32
	for _, r := range target {
		if !contains(cur, r) {
			adding = append(adding, r)
		}
	}
	for _, r := range cur {
		if !contains(target, r) {
			removing = append(removing, r)
		}
	}
	p.Replicas = append(slices.Clone(target), removing...)
	p.AddingReplicas, p.RemovingReplicas = adding, removing
	if len(adding) == 0 && len(removing) == 0 {
		// Same set (a reorder, or the same list): nothing to copy.
		p.AddingReplicas, p.RemovingReplicas = nil, nil
	}
}

// maybeComplete finishes p's reassignment when every adding replica is in
// the ISR, the ISR without the removing replicas is not empty, and a
// leader can be kept or chosen from it. It reports whether p changed; the
// caller bumps the partition epoch.
func (t *txn) maybeComplete(p *Partition) bool {
	if !p.Reassigning() {
		return false
	}
	for _, r := range p.AddingReplicas {
		if !contains(p.ISR, r) {
			return false
		}
	}
	var isr []int32
	for _, r := range p.ISR {
		if !contains(p.RemovingReplicas, r) {
			isr = append(isr, r)
		}
	}
	if len(isr) == 0 {
		return false
	}
	next := *p
	next.Replicas = p.TargetReplicas()
	next.ISR = isr
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	next.Offline = nil
	for _, r := range p.Offline {
		if contains(next.Replicas, r) {
			next.Offline = append(next.Offline, r)
		}
	}
	if next.Leader == NoLeader || !contains(isr, next.Leader) {
		// The leader is being removed (or there is none): the first
		// target replica in the new ISR takes over; none eligible means
		// the old replicas stay until one is.
		l := t.firstEligible(&next, isr)
		if l == NoLeader {
			return false
		}
		next.Leader = l
		next.LeaderEpoch++
	}
	*p = next
	return true
}

// revert cancels p's reassignment: the adding replicas leave the replica
// set and the ISR (KRaft's PartitionReassignmentRevert), and an adding
// replica that leads hands leadership back to the remaining ISR.
func (t *txn) revert(p *Partition) {
	var reps, isr []int32
	for _, r := range p.Replicas {
		if !contains(p.AddingReplicas, r) {
			reps = append(reps, r)
		}
	}
	for _, r := range p.ISR {
		if !contains(p.AddingReplicas, r) {
			isr = append(isr, r)
		}
	}
	p.Replicas = reps
	p.AddingReplicas, p.RemovingReplicas = nil, nil
	var off []int32
	for _, r := range p.Offline {
		if contains(reps, r) {
			off = append(off, r)
		}
	}
	p.Offline = off
	if len(isr) == 0 {
		// Only adding replicas were in sync: the ISR is never empty, so
		// the first live original replica becomes the sole member (an
		// unclean choice, as KRaft's revert marks it).
		first := t.firstEligible(p, reps)
		if first == NoLeader {
			first = reps[0]
		}
		isr = []int32{first}
	}
	p.ISR = isr
	if p.Leader == NoLeader || !contains(isr, p.Leader) {
		if l := t.firstEligible(p, isr); l != p.Leader {
			p.Leader = l
			p.LeaderEpoch++
		}
	}
}
