// Package replication is the core of ringlog's partition replication:
// pure state machines for the leader (ISR, high watermark, AlterPartition)
// and the follower (fetch building, truncation by leader epoch), the
// acks=all purgatory, and a goroutine driver for follower fetching.
// The leader-epoch checkpoint is package engine/epochcache.
//
// # Seams
//
// No Kafka protocol types: netpath/peer implements FetchClient (Kafka
// Fetch to the leader); the broker package drives the state machines
// (broker/replicas.go: a LeaderState per led partition, whose
// OnFollowerFetch takes the follower fetches netpath's Fetch handler
// hands it, and Fetchers for followed ones) and adapts an engine
// partition to Log (the engine owns an epochcache.Cache per partition)
// and implements Controller over the controller node
// (broker/replication_controller.go). Time is always passed in (now arguments, or Clock for the goroutines), so every
// rule is testable without sockets or sleeps.
//
// # Rules (Kafka's, with the KIPs that fixed them)
//
//   - HW = min(leader DurableEnd, reported fetch offsets of the maximal
//     ISR), never decreasing within a leader epoch. The maximal ISR is the
//     committed ISR plus the members of an in-flight AlterPartition
//     (KIP-497), kept after a stale/unknown-outcome answer until metadata
//     says what happened.
//   - A follower's fetch offset is its durable end: with --fsync always a
//     partition with unflushed appends is left out of requests until the
//     flush, so "fetched from N" means "N is on my disk" (KIP-966's lesson).
//   - A follower pays per fetch, not per partition: one request per leader
//     carries every ready partition, the records of a response are all
//     appended before the Fetcher waits for any, and the next request
//     (reporting the new durable ends, which advance the leader's HW)
//     leaves as soon as the last of them is durable. A partition added
//     while a request long-polls cancels it, so it is fetched at once;
//     errors that only mean the leader's metadata lags ours back off
//     briefly (MetadataLagBackoff), others FetchBackoff, and a request
//     sent while a partition backs off long-polls only until its backoff
//     ends.
//   - A follower leaves the ISR when it has not reached the leader's log
//     end within ReplicaLagTimeMax (lastCaughtUp as in Kafka's Replica);
//     it rejoins once its offset reaches the HW and the current epoch's
//     start offset. Every change goes through the controller with the
//     partition epoch; one change is in flight at a time.
//   - Followers never truncate to the HW on a leader change. They fetch
//     with LastFetchedEpoch; the leader answers DivergingEpoch (Fetch v12+)
//     and the follower truncates by epoch (KIP-101, KIP-279, KIP-320).
//   - Tiered storage (KIP-405): a fetch offset below the leader's local
//     log start, in data only the remote tier holds, is answered
//     OFFSET_MOVED_TO_TIERED_STORAGE. The follower parks the partition
//     (no fetches), calls Config.RemoteRestart in a goroutine with a
//     deadline, and, if the partition is still followed in the same
//     epoch when it returns, restarts its log at the remote tier's end
//     with the remote producer state and epochs (Log.RestartFromRemote)
//     and fetches on from there; errors back off FetchBackoff. The other
//     partitions keep fetching meanwhile; the leader's ISR rules are
//     unchanged (a parked follower is not caught up, and catches up
//     afterwards like any other).
//   - acks=all: CheckProduce refuses with NOT_ENOUGH_REPLICAS when the
//     committed ISR is below min.insync.replicas; Purgatory completes when
//     the HW passes the last offset, with NOT_ENOUGH_REPLICAS_AFTER_APPEND
//     if the maximal ISR is then below it. A waiter belongs to the leader
//     epoch of its append: only that epoch's HW answers it, and the end of
//     the epoch fails it with NOT_LEADER_OR_FOLLOWER (also when the waiter
//     is added after the end). The leader reports HW and maximal ISR on
//     every update and at the start of a leadership (Lead), so a waiter
//     added below the HW (a deduplicated retry) is answered at once. Every
//     waiter is answered by its deadline.
//
// # Fault model and evidence
//
// model_test.go runs three brokers with crashes that lose unflushed data,
// restarts (fenced before they may lead again), isolation, message loss
// and delay, and stale metadata, and checks that no acknowledged record is
// lost or moved, committed prefixes never diverge, a leader's HW never
// goes down within an epoch, and nothing is acknowledged without
// min.insync durable copies, and every produce is answered by its
// deadline with a produce answer (waiters registered late, epoch bumps).
// Known-wrong variants (HW truncation, no
// maximal ISR, reverting an unknown AlterPartition outcome, counting
// unflushed offsets) fail it.
package replication
