package replication

import "slices"

// FollowerProgress is what the leader knows of one follower, for metrics.
type FollowerProgress struct {
	ReplicaID int32
	InISR     bool
	// Fetched is the durable end the follower last reported (its fetch
	// offset), NoOffset until it fetched from this leader.
	Fetched int64
	// Lag is the leader's log end offset minus Fetched: how far behind the
	// follower is, which is how far it holds the high watermark back while
	// it is in the ISR. The full log end when the follower never fetched.
	Lag int64
}

// Replicas is the partition's assignment (a copy).
func (l *LeaderState) Replicas() []int32 { return slices.Clone(l.replicas) }

// Followers reports every assigned follower's progress, in replica id
// order. Like every LeaderState method it must be called under the
// caller's partition lock.
func (l *LeaderState) Followers() []FollowerProgress {
	leo := l.log.LogEndOffset()
	out := make([]FollowerProgress, 0, len(l.followers))
	for _, id := range l.replicas {
		fs := l.followers[id]
		if fs == nil {
			continue
		}
		fetched := fs.leo
		lag := leo
		if fetched != NoOffset {
			lag = max(leo-fetched, 0)
		}
		out = append(out, FollowerProgress{ReplicaID: id, InISR: containsID(l.isr, id), Fetched: fetched, Lag: lag})
	}
	return out
}
