package metadata

import (
	"fmt"
	"maps"
	"slices"
)

// MaxTopicNameLen is Kafka's limit on topic names.
const MaxTopicNameLen = 249

// Apply returns the image after applying c at raft index index, and the
// command's result. It is pure: the receiver is not modified, and a
// rejected command yields an image that differs only in Index.
func (im *Image) Apply(index uint64, c Command) (*Image, Result) {
	t := im.begin(index)
	var res Result
	switch {
	case c.InitCluster != nil:
		res = t.initCluster(c.InitCluster)
	case c.RegisterBroker != nil:
		res = t.registerBroker(c.RegisterBroker)
	case c.UnfenceBroker != nil:
		res = t.unfenceBroker(c.UnfenceBroker)
	case c.FenceBroker != nil:
		res = t.fenceBroker(c.FenceBroker)
	case c.CreateTopic != nil:
		res = t.createTopic(c.CreateTopic)
	case c.DeleteTopic != nil:
		res = t.deleteTopicCmd(c.DeleteTopic)
	case c.CreatePartitions != nil:
		res = t.createPartitions(c.CreatePartitions)
	case c.AlterPartition != nil:
		res = t.alterPartition(c.AlterPartition)
	case c.ElectLeader != nil:
		res = t.electLeader(c.ElectLeader)
	case c.AllocateProducerIDs != nil:
		res = t.allocateProducerIDs(c.AllocateProducerIDs)
	case c.ReplicaOffline != nil:
		res = t.replicaOffline(c.ReplicaOffline)
	case c.AlterScramCredentials != nil:
		res = t.alterScram(c.AlterScramCredentials)
	case c.CreateACLs != nil:
		res = t.createACLs(c.CreateACLs)
	case c.DeleteACLs != nil:
		res = t.deleteACLs(c.DeleteACLs)
	case c.AlterConfigs != nil:
		res = t.alterConfigs(c.AlterConfigs)
	case c.AlterClientQuotas != nil:
		res = t.alterClientQuotas(c.AlterClientQuotas)
	case c.AlterPartitionReassignments != nil:
		res = t.alterReassignments(c.AlterPartitionReassignments)
	case c.UnregisterBroker != nil:
		res = t.unregisterBroker(c.UnregisterBroker)
	case c.CommitRemoteSegment != nil:
		res = t.commitRemoteSegment(c.CommitRemoteSegment)
	case c.DeleteRemoteSegments != nil:
		res = t.deleteRemoteSegments(c.DeleteRemoteSegments)
	case c.RemoteTopicPurged != nil:
		res = t.remoteTopicPurged(c.RemoteTopicPurged)
	default:
		res.Err = fmt.Errorf("%w: empty command", ErrInvalidCommand)
	}
	res.Index = index
	if res.Err != nil {
		// Discard partial writes: only the index moves.
		next := *im
		next.index = index
		return &next, res
	}
	return t.im, res
}

func (t *txn) initCluster(c *InitCluster) Result {
	if t.im.clusterID != "" {
		return Result{Err: fmt.Errorf("%w: %q", ErrClusterInitialized, t.im.clusterID)}
	}
	if c.ClusterID == "" {
		return Result{Err: fmt.Errorf("%w: empty cluster id", ErrInvalidCommand)}
	}
	t.im.clusterID = c.ClusterID
	return Result{}
}

// broker checks that id is registered with epoch.
func (t *txn) broker(id int32, epoch uint64) (*Broker, error) {
	b, ok := t.im.brokers[id]
	if !ok {
		return nil, fmt.Errorf("%w: broker %d", ErrUnknownBroker, id)
	}
	if b.Epoch != epoch {
		return nil, fmt.Errorf("%w: broker %d has epoch %d, request carries %d", ErrStaleBrokerEpoch, id, b.Epoch, epoch)
	}
	return b, nil
}

func (t *txn) registerBroker(c *RegisterBroker) Result {
	switch {
	case t.im.clusterID == "":
		return Result{Err: ErrClusterNotInitialized}
	case c.ClusterID != t.im.clusterID:
		return Result{Err: fmt.Errorf("%w: broker %d has %q, cluster is %q", ErrClusterIDMismatch, c.ID, c.ClusterID, t.im.clusterID)}
	case c.ID < 0 || c.Incarnation.IsZero():
		return Result{Err: fmt.Errorf("%w: broker id %d, incarnation %s", ErrInvalidCommand, c.ID, c.Incarnation)}
	}
	old, ok := t.im.brokers[c.ID]
	if ok && old.Incarnation == c.Incarnation {
		b := *old
		return Result{Broker: &b}
	}
	if ok && !old.Fenced {
		// The old process is gone: whatever it led must move now rather
		// than wait for its session to time out.
		t.fence(old)
	}
	// A new process re-opened (and recovered) its logs: replicas it had
	// reported offline may rejoin through the usual catch-up.
	t.updatePartitions(func(p *Partition) bool {
		if !contains(p.Offline, c.ID) {
			return false
		}
		p.Offline = without(p.Offline, c.ID)
		if len(p.Offline) == 0 {
			p.Offline = nil
		}
		return true
	})
	b := &Broker{
		ID:          c.ID,
		Incarnation: c.Incarnation,
		Epoch:       t.im.index,
		Endpoints:   slices.Clone(c.Endpoints),
		Rack:        c.Rack,
		Fenced:      true,
	}
	t.putBroker(b)
	out := *b
	return Result{Broker: &out}
}

func (t *txn) unfenceBroker(c *UnfenceBroker) Result {
	b, err := t.broker(c.ID, c.Epoch)
	if err != nil {
		return Result{Err: err}
	}
	if !b.Fenced {
		out := *b
		return Result{Broker: &out}
	}
	nb := *b
	nb.Fenced = false
	t.putBroker(&nb)
	// Partitions left without a leader come back when a member of their
	// ISR does (the ISR is never shrunk below one member, see fence).
	t.updatePartitions(func(p *Partition) bool {
		// A reassignment that waited for an eligible leader may finish.
		completed := t.maybeComplete(p)
		if p.Leader != NoLeader || !contains(p.ISR, nb.ID) || contains(p.Offline, nb.ID) {
			return completed
		}
		p.Leader = nb.ID
		p.LeaderEpoch++
		return true
	})
	return Result{Broker: &nb}
}

func (t *txn) fenceBroker(c *FenceBroker) Result {
	b, err := t.broker(c.ID, c.Epoch)
	if err != nil {
		return Result{Err: err}
	}
	if b.Fenced {
		return Result{Err: fmt.Errorf("%w: broker %d", ErrAlreadyFenced, c.ID)}
	}
	t.fence(b)
	nb, _ := t.im.brokers[c.ID]
	out := *nb
	return Result{Broker: &out}
}

// fence marks b fenced, removes it from every ISR that keeps another member,
// and moves its leaderships to the first in-sync unfenced replica (in
// replica order), or to NoLeader when there is none. Leaders are never
// chosen outside the ISR here: that is ElectLeader's unclean mode.
func (t *txn) fence(b *Broker) {
	nb := *b
	nb.Fenced = true
	t.putBroker(&nb)
	t.updatePartitions(func(p *Partition) bool {
		changed := false
		if len(p.ISR) > 1 && contains(p.ISR, nb.ID) {
			p.ISR = without(p.ISR, nb.ID)
			changed = true
		}
		if p.Leader == nb.ID {
			p.Leader = t.firstEligible(p, p.ISR)
			p.LeaderEpoch++
			changed = true
		}
		return changed
	})
}

// firstEligible returns the first of p's replicas (in replica order) that
// is in set, unfenced and not offline.
func (t *txn) firstEligible(p *Partition, set []int32) int32 {
	for _, r := range p.Replicas {
		if contains(set, r) && t.unfenced(r) && !contains(p.Offline, r) {
			return r
		}
	}
	return NoLeader
}

// replicaOffline applies a broker's report of failed replicas. Partitions
// the broker does not replicate, or already reported, are left alone, so
// a retried report is harmless.
func (t *txn) replicaOffline(c *ReplicaOffline) Result {
	if _, err := t.broker(c.BrokerID, c.BrokerEpoch); err != nil {
		return Result{Err: err}
	}
	name, ok := t.im.topicNames[c.TopicID]
	if !ok {
		return Result{Err: fmt.Errorf("%w: topic id %s", ErrUnknownTopic, c.TopicID)}
	}
	tp := t.im.topics[name]
	for _, idx := range c.Partitions {
		if idx < 0 || int(idx) >= len(tp.Partitions) {
			return Result{Err: fmt.Errorf("%w: %s-%d", ErrUnknownTopic, tp.Name, idx)}
		}
	}
	if nt := updateTopic(tp, func(i int, p *Partition) bool {
		if !slices.Contains(c.Partitions, int32(i)) || !contains(p.Replicas, c.BrokerID) || contains(p.Offline, c.BrokerID) {
			return false
		}
		p.Offline = append(p.Offline, c.BrokerID)
		if len(p.ISR) > 1 {
			// The last member stays: it may hold records no one else
			// has, and leads again once its broker recovers the log.
			p.ISR = without(p.ISR, c.BrokerID)
		}
		if p.Leader == c.BrokerID {
			p.Leader = t.firstEligible(p, p.ISR)
			p.LeaderEpoch++
		}
		return true
	}); nt != nil {
		t.putTopic(nt)
		tp = nt
	}
	out := *tp
	return Result{Topic: &out}
}

// updatePartitions calls f on a copy of every partition; when f reports a
// change the partition epoch is bumped and the topic replaced.
func (t *txn) updatePartitions(f func(p *Partition) bool) {
	var changed []*Topic
	for _, tp := range t.im.topics {
		if nt := updateTopic(tp, func(_ int, p *Partition) bool { return f(p) }); nt != nil {
			changed = append(changed, nt)
		}
	}
	for _, nt := range changed {
		t.putTopic(nt)
	}
}

// updateTopic calls f on a copy of each of tp's partitions and returns a
// new topic holding the ones f changed, their partition epochs bumped, or
// nil when f changed none.
func updateTopic(tp *Topic, f func(i int, p *Partition) bool) *Topic {
	var nt *Topic
	for i := range tp.Partitions {
		p := tp.Partitions[i].clone()
		if !f(i, &p) {
			continue
		}
		p.PartitionEpoch++
		if nt == nil {
			c := *tp
			c.Partitions = slices.Clone(tp.Partitions)
			nt = &c
		}
		nt.Partitions[i] = p
	}
	return nt
}

// validAssignment checks replica lists: non-empty, equal length rf (when
// rf > 0), no duplicates, registered brokers only.
func (t *txn) validAssignment(a [][]int32, rf int) error {
	for i, reps := range a {
		if len(reps) == 0 || (rf > 0 && len(reps) != rf) {
			return fmt.Errorf("%w: partition %d has %d replicas, want %d", ErrInvalidAssignment, i, len(reps), rf)
		}
		for j, r := range reps {
			if _, ok := t.im.brokers[r]; !ok {
				return fmt.Errorf("%w: partition %d: broker %d not registered", ErrInvalidAssignment, i, r)
			}
			if slices.Contains(reps[:j], r) {
				return fmt.Errorf("%w: partition %d: broker %d twice", ErrInvalidAssignment, i, r)
			}
		}
	}
	return nil
}

// newPartition starts a partition with the unfenced replicas in sync and the
// first of them leading.
func (t *txn) newPartition(reps []int32) (Partition, error) {
	p := Partition{Replicas: slices.Clone(reps), Leader: NoLeader}
	for _, r := range reps {
		if t.unfenced(r) {
			p.ISR = append(p.ISR, r)
		}
	}
	if len(p.ISR) == 0 {
		return p, fmt.Errorf("%w: no unfenced replica in %v", ErrInvalidAssignment, reps)
	}
	p.Leader = p.ISR[0]
	return p, nil
}

func (t *txn) createTopic(c *CreateTopic) Result {
	switch {
	case c.Name == "" || len(c.Name) > MaxTopicNameLen:
		return Result{Err: fmt.Errorf("%w: name %q", ErrInvalidTopic, c.Name)}
	case c.ID.IsZero():
		return Result{Err: fmt.Errorf("%w: zero topic id", ErrInvalidCommand)}
	case len(c.Assignment) == 0:
		return Result{Err: fmt.Errorf("%w: no partitions", ErrInvalidPartitions)}
	}
	if _, ok := t.im.topics[c.Name]; ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrTopicExists, c.Name)}
	}
	if _, ok := t.im.topicNames[c.ID]; ok {
		return Result{Err: fmt.Errorf("%w: topic id %s in use", ErrTopicExists, c.ID)}
	}
	if t.remotePurgePending(c.ID) {
		return Result{Err: fmt.Errorf("%w: topic id %s: a deleted topic's remote objects under it are not purged yet", ErrTopicExists, c.ID)}
	}
	if err := t.validAssignment(c.Assignment, len(c.Assignment[0])); err != nil {
		return Result{Err: err}
	}
	tp := &Topic{ID: c.ID, Name: c.Name, Configs: maps.Clone(c.Configs)}
	if tp.Configs == nil {
		tp.Configs = map[string]string{}
	}
	for _, reps := range c.Assignment {
		p, err := t.newPartition(reps)
		if err != nil {
			return Result{Err: err}
		}
		tp.Partitions = append(tp.Partitions, p)
	}
	t.putTopic(tp)
	out := *tp
	return Result{Topic: &out}
}

func (t *txn) deleteTopicCmd(c *DeleteTopic) Result {
	tp, ok := t.im.topics[c.Name]
	if !ok || (!c.ID.IsZero() && tp.ID != c.ID) {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)}
	}
	t.deleteTopic(tp)
	t.remoteTopicDeleted(tp)
	out := *tp
	return Result{Topic: &out}
}

func (t *txn) createPartitions(c *CreatePartitions) Result {
	tp, ok := t.im.topics[c.Name]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)}
	}
	if len(c.Assignment) == 0 || int(c.Total) != len(tp.Partitions)+len(c.Assignment) {
		return Result{Err: fmt.Errorf("%w: topic %q has %d partitions; asked for %d with %d new", ErrInvalidPartitions, c.Name, len(tp.Partitions), c.Total, len(c.Assignment))}
	}
	if err := t.validAssignment(c.Assignment, len(tp.Partitions[0].TargetReplicas())); err != nil {
		return Result{Err: err}
	}
	nt := *tp
	nt.Partitions = slices.Clone(tp.Partitions)
	for _, reps := range c.Assignment {
		p, err := t.newPartition(reps)
		if err != nil {
			return Result{Err: err}
		}
		nt.Partitions = append(nt.Partitions, p)
	}
	t.putTopic(&nt)
	out := nt
	return Result{Topic: &out}
}

// partitionByID finds a partition for modification.
func (t *txn) partitionByID(id UUID, idx int32) (*Topic, Partition, error) {
	name, ok := t.im.topicNames[id]
	if !ok {
		return nil, Partition{}, fmt.Errorf("%w: topic id %s", ErrUnknownTopic, id)
	}
	tp := t.im.topics[name]
	if idx < 0 || int(idx) >= len(tp.Partitions) {
		return nil, Partition{}, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, name, idx)
	}
	return tp, tp.Partitions[idx].clone(), nil
}

func (t *txn) replacePartition(tp *Topic, idx int32, p Partition) {
	nt := *tp
	nt.Partitions = slices.Clone(tp.Partitions)
	nt.Partitions[idx] = p
	t.putTopic(&nt)
}

func (t *txn) alterPartition(c *AlterPartition) Result {
	if _, err := t.broker(c.BrokerID, c.BrokerEpoch); err != nil {
		return Result{Err: err}
	}
	tp, p, err := t.partitionByID(c.TopicID, c.Partition)
	if err != nil {
		return Result{Err: err}
	}
	switch {
	case c.LeaderEpoch < p.LeaderEpoch:
		return Result{Err: fmt.Errorf("%w: %s-%d is at leader epoch %d, request has %d", ErrFencedLeaderEpoch, tp.Name, c.Partition, p.LeaderEpoch, c.LeaderEpoch)}
	case c.LeaderEpoch > p.LeaderEpoch || c.PartitionEpoch != p.PartitionEpoch:
		return Result{Err: fmt.Errorf("%w: %s-%d is at epochs %d/%d, request has %d/%d", ErrInvalidUpdateVersion, tp.Name, c.Partition, p.LeaderEpoch, p.PartitionEpoch, c.LeaderEpoch, c.PartitionEpoch)}
	case p.Leader != c.BrokerID:
		return Result{Err: fmt.Errorf("%w: %s-%d is led by %d", ErrNotLeader, tp.Name, c.Partition, p.Leader)}
	case !contains(c.NewISR, c.BrokerID):
		return Result{Err: fmt.Errorf("%w: new ISR %v lacks the leader %d", ErrInvalidCommand, c.NewISR, c.BrokerID)}
	}
	for i, r := range c.NewISR {
		if !contains(p.Replicas, r) || slices.Contains(c.NewISR[:i], r) {
			return Result{Err: fmt.Errorf("%w: new ISR %v vs replicas %v", ErrIneligibleReplica, c.NewISR, p.Replicas)}
		}
		if !contains(p.ISR, r) && !t.unfenced(r) {
			return Result{Err: fmt.Errorf("%w: broker %d is fenced or unknown", ErrIneligibleReplica, r)}
		}
		if !contains(p.ISR, r) && contains(p.Offline, r) {
			return Result{Err: fmt.Errorf("%w: broker %d reported its replica offline", ErrIneligibleReplica, r)}
		}
	}
	if !sameSet(p.ISR, c.NewISR) {
		p.ISR = slices.Clone(c.NewISR)
		// The ISR change that brings the last adding replica in sync
		// completes a reassignment in the same entry (KRaft does too).
		t.maybeComplete(&p)
		p.PartitionEpoch++
		t.replacePartition(tp, c.Partition, p)
	}
	return Result{Partition: &p}
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}

func (t *txn) electLeader(c *ElectLeader) Result {
	tp, ok := t.im.topics[c.Topic]
	if !ok || c.Partition < 0 || int(c.Partition) >= len(tp.Partitions) {
		return Result{Err: fmt.Errorf("%w: %s-%d", ErrUnknownTopic, c.Topic, c.Partition)}
	}
	p := tp.Partitions[c.Partition].clone()
	if c.Preferred {
		return t.electPreferred(c, tp, p)
	}
	target := t.firstEligible(&p, p.ISR)
	if c.Unclean {
		if p.Leader != NoLeader && t.unfenced(p.Leader) {
			return Result{Err: fmt.Errorf("%w: %s-%d is led by %d", ErrElectionNotNeeded, c.Topic, c.Partition, p.Leader)}
		}
		if target == NoLeader {
			// Unclean: any live replica, accepting the loss of whatever
			// only the ISR had.
			target = t.firstEligible(&p, p.Replicas)
			if target != NoLeader {
				p.ISR = []int32{target}
			}
		}
	}
	switch {
	case target == NoLeader:
		return Result{Err: fmt.Errorf("%w: %s-%d replicas %v isr %v", ErrNoEligibleLeader, c.Topic, c.Partition, p.Replicas, p.ISR)}
	case target == p.Leader:
		return Result{Err: fmt.Errorf("%w: %s-%d is led by %d", ErrElectionNotNeeded, c.Topic, c.Partition, p.Leader)}
	}
	p.Leader = target
	p.LeaderEpoch++
	p.PartitionEpoch++
	t.replacePartition(tp, c.Partition, p)
	return Result{Partition: &p}
}

// electPreferred moves leadership to the preferred replica. Only an
// unfenced ISR member qualifies: it has everything the ISR acknowledged,
// so the move loses nothing.
func (t *txn) electPreferred(c *ElectLeader, tp *Topic, p Partition) Result {
	if c.Unclean {
		return Result{Err: fmt.Errorf("%w: preferred and unclean election together", ErrInvalidCommand)}
	}
	if len(p.Replicas) == 0 {
		return Result{Err: fmt.Errorf("%w: %s-%d has no replicas", ErrPreferredNotAvailable, c.Topic, c.Partition)}
	}
	pref := p.Replicas[0]
	switch {
	case p.Leader == pref:
		return Result{Err: fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, c.Topic, c.Partition, pref)}
	case !t.unfenced(pref):
		return Result{Err: fmt.Errorf("%w: %s-%d preferred replica %d is fenced", ErrPreferredNotAvailable, c.Topic, c.Partition, pref)}
	case contains(p.Offline, pref):
		return Result{Err: fmt.Errorf("%w: %s-%d preferred replica %d is offline", ErrPreferredNotAvailable, c.Topic, c.Partition, pref)}
	case !contains(p.ISR, pref):
		return Result{Err: fmt.Errorf("%w: %s-%d preferred replica %d is not in the ISR %v", ErrPreferredNotAvailable, c.Topic, c.Partition, pref, p.ISR)}
	}
	p.Leader = pref
	p.LeaderEpoch++
	p.PartitionEpoch++
	t.replacePartition(tp, c.Partition, p)
	return Result{Partition: &p}
}

func (t *txn) allocateProducerIDs(c *AllocateProducerIDs) Result {
	b, err := t.broker(c.BrokerID, c.BrokerEpoch)
	if err != nil {
		return Result{Err: err}
	}
	if b.Fenced {
		return Result{Err: fmt.Errorf("%w: broker %d", ErrBrokerFenced, b.ID)}
	}
	start := t.im.nextProducerID
	t.im.nextProducerID += ProducerIDBlockSize
	return Result{ProducerIDStart: start}
}
