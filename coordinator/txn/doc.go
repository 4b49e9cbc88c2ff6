// Package txn is ringlog's transaction coordinator: the per
// transactional.id state machine behind InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, and the
// __transaction_state records that make it durable. Like
// coordinator/group it speaks plain Go structs; netpath translates the
// Kafka messages and maps the errors in errors.go to kerr codes.
//
// # States (Kafka's TransactionState, same byte values)
//
//	Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit|PrepareAbort
//	PrepareX ──markers written to every partition──▶ CompleteCommit|CompleteAbort
//	Complete*/Empty ──AddPartitions──▶ Ongoing;  ──InitProducerId──▶ Empty (epoch+1)
//	Ongoing ──InitProducerId from a new producer / timeout──▶ PrepareAbort (epoch+1)
//	Empty/Complete* ──idle transactional.id.expiration.ms──▶ Dead (tombstone, forgotten)
//
// A transition is applied in memory only once its record is durable;
// meanwhile the transaction answers ErrConcurrentTransactions, as do
// PrepareCommit/PrepareAbort until their markers are written.
// PrepareEpochFence is decoded but never stored: a fence here is one
// PrepareAbort record carrying the bumped epoch, so a failed write leaves
// nothing to undo.
//
// # Inputs and outputs
//
// No clock is read by the machine itself: request time comes from the
// injected Clock, and timeouts, marker retries and expiry fire only in
// Tick(now). Collaborators are interfaces: Persister (appends to a
// __transaction_state partition), MarkerWriter (WriteTxnMarkers to the
// partition leaders), IDAllocator (producer ids from the controller's
// blocks). Every call that writes returns a Future; goroutines only wait
// on Waiters and then re-enter the machine under the transaction's lock.
//
// # Takeover
//
// A node becoming leader of a __transaction_state partition calls
// BeginLoad, reads the partition through Load, then FinishLoad with the
// partition's leader epoch (the coordinator epoch that markers carry, so
// partitions can fence a zombie coordinator). Transactions found in
// PrepareCommit/PrepareAbort get their markers re-sent at once; Ongoing
// ones are aborted by Tick when they time out. Unload answers everything
// in flight with ErrNotCoordinator.
//
// # Differences from Kafka
//
//   - KIP-890 part 2 (transaction version 2: epoch bump on every EndTxn,
//     implicit AddPartitions by Produce v12) is not implemented; we write
//     TransactionLogValue v0 and read v0 and v1.
//   - lastProducerId/lastProducerEpoch (KIP-360 retries) live in memory
//     only, as in Kafka with v0 records: a retry that spans a coordinator
//     move is fenced.
//   - Transactional offset commits (TxnOffsetCommit) belong to the group
//     coordinator; here AddOffsetsToTxn only adds the group's
//     __consumer_offsets partition to the transaction, so its marker is
//     written there.
package txn
