// Package group is ringlog's classic consumer group coordinator: the
// JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine with client-side
// assignment, committed offsets, and the __consumer_offsets records that
// make both durable. It speaks plain Go structs; netpath translates the
// Kafka messages (and maps the errors in errors.go to kerr codes).
//
// # States
//
//	Empty ──join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶
//	CompletingRebalance ──leader's SyncGroup──▶ Stable
//	Stable/CompletingRebalance ──join, leave, expiry, metadata change──▶ PreparingRebalance
//	PreparingRebalance ──nobody rejoined──▶ Empty ──delete / offsets expired──▶ Dead
//
// Each completed join phase starts a new generation. Requests that name an
// older generation are zombies (ErrIllegalGeneration); unknown member ids
// get ErrUnknownMemberID; a replaced static member's old id gets
// ErrFencedInstanceID.
//
// # Inputs and outputs
//
// The machine has no goroutines of its own and reads no clock by itself:
// requests come in through Manager methods (time from the injected Clock)
// and deadlines fire only in Tick(now). Calls that may have to wait (Join,
// Sync, CommitOffsets, CommitTxnOffsets, DeleteOffsets, DeleteGroups)
// return a Future that
// another request, a Tick, or a durable append resolves; the rest answer
// directly. Tests drive it with a fake clock and an in-memory Persister.
//
// # Durability
//
// Every state change worth keeping is a key/value record for the group's
// __consumer_offsets partition (PartitionFor, Kafka's placement), in
// Kafka's own schemas (records.go), handed to the Persister while the
// group's lock is held so a group's records are appended in state order.
// Offset commits, SyncGroup answers, static-member replacements and group
// deletions are answered only after their append is durable. A node taking
// over a partition calls BeginLoad (clients get
// ErrCoordinatorLoadInProgress), reads the partition through Load, then
// FinishLoad; a node losing it calls Unload.
//
// # Transactional offsets
//
// TxnOffsetCommit (KIP-98) writes offsets through TxnPersister.AppendTxn
// as a transactional batch of the producer, so they are part of its
// transaction on the group's partition. Until the broker reports the
// transaction's marker on that partition (CompleteTxn, after
// WriteTxnMarkers made it durable) they are pending per (group, producer
// id): OffsetFetch does not return them, and with require_stable (v7+) a
// partition that has one answers ErrUnstableOffsetCommit so the consumer
// waits for the outcome. A commit marker makes them committed, an abort
// drops them; a repeated marker finds nothing and does nothing.
//
// Plain and transactional commits of one partition are ordered by the log:
// every record-producing operation takes the group's next seq under its
// lock, in the order its records are appended, and a transactional offset
// that commits replaces the committed one only if its seq is higher. So a
// plain OffsetCommit that came after the TxnOffsetCommit wins even if the
// marker comes last, which is what Kafka decides by record offset. Load
// replays the same rule with record positions, and FinishLoad turns them
// into seqs, so a marker arriving after a coordinator move orders the
// loaded offsets exactly as the old coordinator would have. A tombstone
// (OffsetDelete, DeleteGroups) deletes the partition's pending offsets of
// every producer as well; offset expiry skips partitions with pending
// offsets and keeps a group alive while it has an open transaction.
// KIP-447 fencing applies when the request carries the consumer's group
// metadata (generation, member id, instance id).
//
// # Concurrency
//
// All Manager methods are safe for concurrent use. Each group has its own
// mutex; Manager.mu guards only the group map and partition ownership. A
// Future's waiter never runs code inside the machine, so resolving one
// under a lock is safe.
//
// # Differences from Kafka
//
//   - A group is Stable as soon as the leader syncs; followers' SyncGroup
//     answers still wait for the durable assignment record.
//   - Offsets of topics a Stable consumer group no longer subscribes to do
//     not expire (Kafka 2.1+ expires them); only Empty groups expire.
//   - Member ids are "<client id or instance id>-<uuid>" as in Kafka, but
//     KIP-848 (the consumer protocol) is not handled here.
//   - Producer epochs are checked only against the producer's open
//     transaction in the group; that the partition was added to the
//     transaction (AddOffsetsToTxn, KIP-890 verification) and the rest of
//     producer fencing are the log's (TxnPersister) business.
//   - A TxnOffsetCommit with an unknown group and a generation gets
//     ErrIllegalGeneration, as Kafka's KIP-848-era coordinator answers
//     (the old one created the group, then failed the member check).
package group
