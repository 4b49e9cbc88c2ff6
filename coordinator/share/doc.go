// Package share is the partition-leader side of share groups (KIP-932):
// the state of each share-partition (a group's view of one topic
// partition), share sessions, and acknowledgements. The group side
// (membership, ShareGroupHeartbeat, assignment) is coordinator/group's;
// netpath translates ShareFetch, ShareAcknowledge and the share-group
// offset APIs into calls on Manager.
//
// # A share-partition
//
// Records between the share-partition start offset (SPSO) and end offset
// (SPEO) are in flight; each has a state and a delivery count:
//
//	            acquire (count+1, lock until now+lock duration)
//	Available ─────────────────────────────────────────────▶ Acquired
//	    ▲                                                       │
//	    │ release, lock expiry, session close                   │ accept
//	    │ (count < delivery limit)                              ▼
//	    └──────────────────────────────────────────────── Acknowledged
//	  Acquired ──reject, gap, or release/expiry at the limit──▶ Archived
//
// Records at or above SPEO have never been acquired: acquiring them
// extends the window, which holds at most MaxRecordLocks records. SPSO
// moves past the prefix of Acknowledged and Archived records. Offsets the
// log does not hold (compacted away, control batches, aborted
// transactions) are Archived when the window reaches them, never
// delivered.
//
// # Time and durability
//
// Partition is a plain state machine: every call that depends on time
// takes now, and nothing expires between Tick calls, so tests drive lock
// expiry without sleeping. Manager adds locking, sessions and the
// Persister hook: each change a client must not lose (an acknowledgement,
// a start offset moved by an admin) is handed to Persister.Write as a
// Snapshot, and Restore rebuilds a partition from one (acquired records
// come back Available, as their locks did not survive). A failed write
// drops the Manager's copy, so the stored state stays the truth. Store is
// the owner side of the __share_group_state topic the broker implements
// the Persister on (store.go has the record format); MemoryPersister
// keeps snapshots in memory (tests, netpath without a broker).
//
// Snapshots carry the data partition's leader epoch (Manager.Lead). A
// new leader's first read of the state stores its epoch with it, and the
// store refuses older epochs from then on: a deposed leader that has not
// heard of its deposition cannot overwrite what the new leader wrote
// (its acknowledgements fail with ErrFencedLeaderEpoch instead).
package share
