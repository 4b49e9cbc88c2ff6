// Package group is ringlog's group coordinator: the classic
// JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine with client-side
// assignment, the KIP-848 consumer protocol (ConsumerGroupHeartbeat with
// server-side assignment) beside it, committed offsets, and the
// __consumer_offsets records that make all of it durable. It speaks plain
// Go structs; netpath translates the Kafka messages (and maps the errors
// in errors.go to kerr codes).
//
// # Classic group states
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
// # Consumer (KIP-848) groups
//
// A group is classic or consumer (group.consumer != nil); both keep their
// offsets in the same group, so offsets, transactions, expiry, routing and
// loading are shared. The broker computes the assignment; members move
// towards it through heartbeats, without a group-wide barrier.
//
//	group:  Empty ──join──▶ Assigning (group epoch > assignment epoch)
//	        Assigning ──assignor runs in the same heartbeat──▶ Reconciling
//	        Reconciling ──every member at the assignment epoch, Stable──▶ Stable
//	        any ──join, leave, expiry, subscription or topic change──▶ Assigning
//	        last member gone ──▶ Empty ──delete / offsets expired──▶ Dead
//
//	member: Stable ──new target epoch, nothing to give up──▶ Stable or
//	        UnreleasedPartitions (some new partitions still held by others)
//	        Stable ──target takes partitions away──▶ UnrevokedPartitions
//	        UnrevokedPartitions ──heartbeat owns none of them──▶ recompute
//	        UnrevokedPartitions ──rebalance timeout──▶ removed (fenced)
//	        UnreleasedPartitions ──any heartbeat──▶ recompute (takes freed ones)
//
// The group epoch grows with every change of membership, subscription or
// subscribed topic metadata (a hash of id, name and partition count; regex
// matches are cached per group until the cluster's topic set changes). A
// heartbeat that finds the group epoch ahead of the target assignment runs
// the assignor over all members: the assignor most members name, the
// first of Config.ConsumerAssignors when none names one. A member's epoch
// reaches the assignment epoch only once it gave up what it must revoke,
// and a partition is handed out only when no other member holds it
// assigned or pending revocation (the owners index): a partition never
// has two owners, at the price of a short gap while it moves.
//
// Epochs in a heartbeat: 0 joins (or rejoins a known member id from
// scratch), -1 leaves, -2 is a static member leaving temporarily (it keeps
// its partitions until its session expires or a member with its instance
// id replaces it without a group epoch bump). A request epoch above the
// member's, or below it other than the previous epoch with an owned set
// inside its assignment (a lost answer), is ErrFencedMemberEpoch.
// OffsetCommit's generation is the member epoch; an older epoch may still
// commit partitions the member holds (Kafka 4.3's relaxed rule).
//
// Records, in Kafka's schemas and order: member metadata, group epoch,
// target members then target metadata, current member assignment; one
// Persister.Append per heartbeat, answered once durable. An answer that
// writes nothing waits for the group's last heartbeat append too. An empty
// group converts between the protocols when the other protocol's first
// member arrives and Config.MigrationPolicy allows it, writing tombstones
// for the old protocol's records and keeping the offsets.
//
// # Share (KIP-932) groups
//
// A share group (share_protocol.go) assigns every member every partition
// of its subscribed topics; the partition leaders divide the records.
// Its epoch, members and initialized topics (those whose
// share-partition state may exist on any broker) are records of
// ringlog's own key versions (share_protocol_records.go), appended
// before a heartbeat, AlterShareGroupOffsets or DeleteShareGroupOffsets
// is answered; a loaded group's members carry on at their epochs.
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
//   - Member ids are "<client id or instance id>-<uuid>" as in Kafka
//     (consumer-protocol v0 members get a bare uuid).
//   - Consumer groups: empty groups convert between the protocols only as
//     MigrationPolicy allows (Kafka replaces an empty group of the other
//     type whatever the policy, which governs online migration of groups
//     with members; that is not done here). A heartbeat with a member
//     epoch for a group that does not exist is ErrUnknownMemberID (Kafka:
//     GROUP_ID_NOT_FOUND), which clients answer by rejoining. State
//     changes apply in memory before their append; a failed append fails
//     the answer but is not rolled back (Kafka replays only what was
//     committed), so a member may need a rejoin after a coordinator move.
//     The hash of the subscribed topics is not stored: after a load, the
//     first heartbeat keeps the loaded target if it covers exactly the
//     subscribed partitions and recomputes it otherwise. Epoch -2 needs
//     no instance id in the request (franz-go sends none; the member's
//     own instance id decides), and from a member without one it is a
//     plain leave. A join must carry an empty owned list, as in Kafka.
//   - Producer epochs are checked only against the producer's open
//     transaction in the group; that the partition was added to the
//     transaction (AddOffsetsToTxn, KIP-890 verification) and the rest of
//     producer fencing are the log's (TxnPersister) business.
//   - A TxnOffsetCommit with an unknown group and a generation gets
//     ErrIllegalGeneration, as Kafka's KIP-848-era coordinator answers
//     (the old one created the group, then failed the member check).
package group
