// Package producerstate keeps one partition's idempotent and transactional
// producer state: what Kafka's ProducerStateManager keeps. It does no I/O;
// the engine feeds it batch headers and persists what it returns
// (snapshots, aborted-transaction index entries).
//
// # What it answers
//
//   - Check: may this client batch be appended? A retry of any of the
//     producer's last NumBatchesToRetain (5) batches is a Duplicate and is
//     answered with the ORIGINAL offsets instead of being appended again;
//     a gap is ErrOutOfOrderSequence; an older epoch is
//     ErrInvalidProducerEpoch; a newer epoch must start at sequence 0.
//   - Update / CompleteTxn: record an append (data batch or transaction
//     marker) once the engine assigned its offsets.
//   - LastStableOffset and AbortedTxns: what Fetch with read_committed
//     needs.
//   - ApplyBatch: replay a batch read from the log (recovery, a follower
//     appending what its leader sent, a new leader rebuilding) without
//     client checks: the log is the truth.
//
// # Unknown producers
//
// Following Kafka since KIP-360, a batch from a producer id this partition
// has no state for is accepted whatever its sequence: the state may be gone
// legitimately (expiry, retention, DeleteRecords), and refusing would wedge
// the producer. The price is that a retry arriving after its producer
// expired is appended twice, exactly as in Kafka.
//
// # Snapshot file (<20-digit offset>.snapshot)
//
// The state as of an offset, so recovery replays only the batches at or
// after it. Big-endian:
//
//	 0  [4]byte "RLPS"
//	 4  int16   version (1)
//	 6  uint32  CRC-32C (Castagnoli) of bytes 10..end
//	10  int64   map end offset: the next offset the state has not seen
//	18  int32   producer count, then per producer (sorted by id):
//	            int64 producerId, int16 epoch, int32 coordinatorEpoch,
//	            int64 lastTimestamp, int64 ongoing txn first offset (-1),
//	            int8 batch count (0..5), then per batch, oldest first:
//	            int32 firstSeq, int32 lastSeq, int64 firstOffset,
//	            int64 lastOffset, int64 timestamp
//	    int32   aborted count, then per aborted txn (marker order):
//	            int64 producerId, int64 firstOffset, int64 lastOffset,
//	            int64 lastStableOffset
//	    int32   unreplicated count, then per completed txn whose marker
//	            may still be above the high watermark:
//	            int64 producerId, int64 firstOffset, int64 lastOffset
//
// Unlike Kafka's snapshot it keeps all 5 batches per producer (Kafka keeps
// the last one, so duplicates of the other four are lost at a restart)
// and the aborted-transaction list (Kafka re-reads it from .txnindex).
//
// # Aborted transaction index (<20-digit base offset>.txnindex)
//
// Kafka's per-segment format, 34-byte entries appended in marker order,
// big-endian: int16 version (0), int64 producerId, int64 firstOffset,
// int64 lastOffset (the abort marker's offset), int64 lastStableOffset (the
// LSO right after the marker was appended). An entry belongs to the
// segment holding its marker.
//
// # Concurrency
//
// Every method is atomic (one mutex). A Check and the Update that follows
// it must still be serialized by the caller, under the partition's append
// lock, so no other append slips in between.
package producerstate
