// Package engine is ringlog's segmented log storage.
//
// # On-disk layout
//
// Every name below is spelled once, in internal/layout. A broker's data
// dir (the engine's Config.Dir is the same directory):
//
//	<dir>/meta.properties                    node.id and cluster.id ("k=v" lines),
//	                                         the dir's identity: written at first
//	                                         start and when the node learns the
//	                                         cluster id (layout.OpenMeta, WriteMeta),
//	                                         never by the engine
//	<dir>/raft/raft.db                       controller raft log and stable store
//	                                         (raft-boltdb; package coordinator)
//	<dir>/raft/snapshots/<id>/               controller FSM snapshots (hashicorp/raft
//	                                         file store: meta.json, state.bin; 2 kept)
//	<dir>/__meta/topics.json                 topic metadata
//	<dir>/recovery-point-offset-checkpoint   per-partition flushed offset
//	<dir>/replication-offset-checkpoint      per-partition high watermark (replica.go)
//	<dir>/log-start-offset-checkpoint        log starts DeleteRecords moved inside a
//	                                         segment (logstart.go)
//	<dir>/.ringlog-clean-shutdown            present only after a clean Close
//	<dir>/journal/journal.log                the broker-wide journal of FsyncAlways
//	                                         (Config.JournalBytes, preallocated;
//	                                         "Journal" below)
//	<dir>/<topic>-<partition>/
//	    00000000000000000000.log             record batches
//	    00000000000000000000.index           sparse offset index
//	    00000000000000000000.timeindex       sparse time index
//	    00000000000000001234.snapshot        producer state as of offset 1234
//	                                         (producerstate/doc.go; the newest 3 kept)
//	    leader-epoch-checkpoint              leader epoch -> start offset (epochcache)
//	    00000000000000000000.log.cleaned.tmp the cleaner's copy of a segment, until
//	                                         it is renamed over the .log (cleaner.go)
//	    00000000000000000000.log.tmp         a follower truncation's copy of a
//	                                         segment prefix (replica.go)
//
// Segment and snapshot files are named by an offset, 20 decimal digits.
// A file ending in ".tmp" is an interrupted atomic write: Open removes
// those in partition directories; one beside a data dir file is replaced
// by that file's next write. A data dir of an older version may hold
// cluster.id, which layout.OpenMeta moves into meta.properties. There is
// no ".deleted" or ".txnindex" file: segments past retention and deleted
// topics are removed at once (a topic directory that topics.json does not
// list is removed on Open, finishing a deletion cut by a crash), and the
// aborted-transaction list lives in the producer snapshots.
//
// Every small file (meta.properties, topics.json, both checkpoints, the
// leader-epoch checkpoint, indexes, producer snapshots, the marker) is
// replaced through package vfs: written to "<name>.tmp", fsynced, renamed
// over the old one and, except for indexes and snapshots (rebuilt when
// missing), followed by an fsync of the directory (vfs.WriteFileAtomic,
// vfs.ReplaceFile). The cleaner's and truncation's segment copies use the
// streaming form, vfs.AtomicFile.
//
// # .log
//
// Kafka record batches (magic 2), back to back, byte-for-byte as appended
// except for baseOffset and partitionLeaderEpoch, which the engine assigns
// (both are outside the CRC). Topics with message.timestamp.type=
// LogAppendTime also get attributes bit 3 and maxTimestamp set, and a new
// CRC. On compacted topics the cleaner (cleaner.go) rewrites sealed
// segments: a batch may hold fewer records than lastOffsetDelta+1 (its
// offsets stay; new batchLength, recordCount and CRC) or be gone, so
// offsets only grow, with gaps. Batch header, big-endian:
//
//	 0  int64  baseOffset
//	 8  int32  batchLength (bytes after this field)
//	12  int32  partitionLeaderEpoch
//	16  int8   magic (2)
//	17  uint32 crc: CRC-32C (Castagnoli) of bytes 21..end
//	21  int16  attributes: bits 0-2 codec (0 none .. 4 zstd), 3 timestamp
//	           type, 4 transactional, 5 control
//	23  int32  lastOffsetDelta (= recordCount-1 unless compacted)
//	27  int64  baseTimestamp
//	35  int64  maxTimestamp
//	43  int64  producerId
//	51  int16  producerEpoch
//	53  int32  baseSequence
//	57  int32  recordCount
//	61         records
//
// # .index and .timeindex
//
// .index: 8-byte entries, uint32 relative offset (batch baseOffset minus
// segment base) then uint32 byte position of that batch. One entry for the
// first batch of a segment and then one whenever index.interval.bytes have
// been appended since the last entry; entries strictly increase. A lookup
// takes the last entry at or below the target and scans batch headers.
//
// .timeindex: 12-byte entries, int64 timestamp then uint32 relative offset:
// the largest batch maxTimestamp seen so far and the batch that reached it,
// added with .index entries when the timestamp grew, plus one final entry
// for the segment's maximum when the index is written.
//
// Indexes live in memory and are written when a segment is sealed and at
// Close. On Open they are checked (sizes, monotonic, within the log) and
// rebuilt from the batch headers when missing or implausible.
//
// # Checkpoints and marker
//
// recovery-point-offset-checkpoint and replication-offset-checkpoint
// (Kafka's text format):
//
//	0
//	<count>
//	<topic> <partition> <offset>     one line per partition
//
// In the recovery point file, offset is known flushed: everything below it
// is durable. It is written on segment roll, every
// Config.CheckpointInterval and at Close. The replication file holds the
// high watermark instead, written every Config.HWCheckpointInterval and at
// Close (replica.go). log-start-offset-checkpoint has the same format and
// lists only partitions whose log start lies above their first segment's
// base (DeleteRecords); it is rewritten before a DeleteRecords returns and
// after partitions are dropped, and Open applies it (capped at the log
// end). Nothing about the remote tier is stored here (remote.go): the
// upload watermark and the remote log start come from the remote-log
// metadata after every Open, and until they do a remote-storage topic
// deletes no segment by retention; producer snapshots of its segments
// stay until uploaded.
// .ringlog-clean-shutdown is empty; Close writes it last when every
// partition flushed successfully, and Open deletes it after loading.
//
// # Journal
//
// Under FsyncAlways with Config.Journal (the default) an append is
// acknowledged once it is in its segment (written, not synced) and in the
// broker-wide journal, a preallocated circular file made durable by one
// fdatasync per round for every partition of the round (journal.go). Per
// round, on this VM (ext4 on virtio, 4 KiB per dirty file):
//
//	dirty files  sequential fdatasync  parallel (io-wq)  syncfs   journal write
//	1            0.66 ms               0.70              1.00     0.30
//	8            4.3                   1.9               0.80     0.35
//	64           32                    8.2               2.5      1.0
//	256          150                   23                11       3.4
//
// so the barrier costs per byte, not per partition; syncfs also flushes
// what other writers dirtied and still grows with the files. Layout,
// big-endian:
//
//	0     slot 0 (512 bytes)  checkpoint: u32 magic "RLJH", u32 version 2,
//	512   slot 1                u32 CRC-32C of bytes 12..43, u64 generation,
//	                            u64 start position, u64 start sequence,
//	                            u64 file size; the valid slot with the
//	                            higher generation wins, written alternately
//	4096  records, circular:    u32 magic "RLJR", u32 CRC-32C of bytes 8..
//	                            end of data, u64 sequence (+1 per record,
//	                            continuous across wraps), u8 kind (1 data,
//	                            2 wrap), u8 flags (1: last record of its
//	                            write), u16 name length, u32 data length,
//	                            i64 segment base offset, i64 file
//	                            position, partition directory name, data;
//	                            zeros after a write's last record up to
//	                            the next 4096-byte boundary
//
// A round's records (header and data each) are copied into one
// 4096-aligned buffer, zero-padded to a whole block, and written at a
// block boundary. Where the file system takes O_DIRECT (the OS file
// system; --journal-direct, the default) that write goes through an
// O_DIRECT descriptor with RWF_DSYNC: it is its own barrier, and on the
// ring the kernel issues it inline and completes it from the block layer,
// with no io-wq worker thread (a buffered write and its fdatasync each
// ran on one). Elsewhere (tmpfs, the in-memory test file systems,
// --journal-direct=false) it is a buffered write and one fdatasync, a
// pwrite (sync path) or a WRITE linked to FSYNC(DATASYNC) (ring). The
// journal's blocks were all written when it was created, so an O_DIRECT
// overwrite changes no metadata and the barrier is a device flush. At
// most one journal write is in flight: what arrives meanwhile is the next
// round, and the journal is a prefix of complete writes plus at most one
// torn one. A write that does not fit before the end leaves a wrap
// record block there (or nothing when less than a block is left) and goes
// on at byte 4096. An append larger than a quarter of the journal is
// fdatasynced in its segment instead. Open replays version 1 journals
// (records back to back, no padding) too, then goes on in version 2; it
// adds 2^32 to the next sequence number, so new records never continue
// into what a write torn by the crash left after the replayed end.
//
// Checkpoints run in the background after every 1 MiB of records written,
// padding not counted (an eighth of the journal if that is less: many
// small checkpoints stall the journal's barriers less than few large
// ones), when the journal is three quarters full whatever that holds, at
// Close, and before anything rewrites segment bytes other than by
// appending (TruncateTo, TruncateFullyAndStartAt, topic and partition
// deletion): every segment written by journaled appends is fdatasynced,
// then the start moves past them (a slot write and fdatasync). A write
// that would pass the start waits for a checkpoint. Open, before loading
// partitions, replays the records from the start while their CRC is
// right and their sequence continues, into their segment at their
// position, skipping segments that are gone or no longer their
// partition's last (rolled, so fdatasynced in full; the cleaner may
// have rewritten them since), fdatasyncs what it wrote and checkpoints
// at the scan's end; then the usual recovery below judges the tails. A
// rollback after ENOSPC needs no checkpoint: only a partition's groups
// below its first failed write are ever journaled.
//
// # topics.json
//
// {"version":1,"topics":[{"name":..,"id":<32 hex digits>,"partitions":N,
// "configs":{<explicit overrides, Kafka key names>},"hosted":[<i>,...]}]}
//
// "hosted" lists the partitions with a local log when that is not all N (a
// cluster broker holds only its replicas; see cluster.go). In a cluster the
// controller's metadata image is the source of truth and this file is a
// local cache of what exists on disk, rewritten by SyncTopic and
// DeleteTopic; Open loads what it lists, and directories it does not list
// are removed.
//
// # Recovery
//
// With the marker, Open trusts the indexes and only rescans the active
// segment's tail from its last index entry to find the log end. Without it,
// segments that start after the recovery point, and the one holding it, are
// scanned batch by batch (length, magic, CRC, increasing offsets) and their
// indexes rebuilt. The first bad byte is then judged:
//
//   - a torn tail, when it is in the last segment at or after the recovery
//     point: the segment is truncated there;
//   - corruption, when it is in a sealed segment or before the recovery
//     point. Those bytes were flushed, so truncating would drop
//     acknowledged data: Open fails with an error wrapping ErrCorruptLog
//     that names the file and the byte position.
//
// Rolling flushes the sealed segment before writing to the new one, so a
// sealed segment is never legitimately torn.
//
// # Fault model
//
// Writes are visible at once and durable after fdatasync; a file's new
// name is durable after its directory is fsynced. A crash may keep any
// prefix of unflushed appends (a torn tail) but does not change flushed
// bytes. A failed fdatasync, or a write failing with an I/O error, cannot
// be retried (the kernel may have dropped the dirty pages): the partition
// goes offline (offline.go), fails its waiters with ErrStorage and refuses
// appends and reads until a restart recovers it from disk; Close then
// writes no clean marker. A write that fails for lack of space (ENOSPC,
// EDQUOT, a short write) is undone instead: the segment is cut back to its
// last whole batch, the failed and later appends fail with ErrStorage
// (not acknowledged) and the partition stays online (writepath.go,
// uring_undo.go). Silent corruption of flushed bytes is detected by CRC
// only when those bytes are scanned.
//
// The fault and crash tests run on both write paths. The pwrite path goes
// through the vfs; the ring bypasses it, so its owner consults the vfs
// itself (uring_faults.go): a vfs.ErrorFS's injected errors, short writes
// and fsync delays become the completions of the ring's operations, and
// each fdatasync the ring completes is reported with vfs.Synced, so a
// crashable vfs.MemFS (NewMemFds: memfd descriptors the ring writes to)
// keeps a ring write only once its fdatasync completed, as it keeps a
// pwrite only after Datasync.
//
// # Write path
//
// Appends are validated, stamped with offsets under the partition lock and
// written by a writeQueue (writepath.go: write, submit, barrier,
// requestFlush, ringStats, close), chosen at Open (Config.IOMode, IOPath,
// IOReason); the ring needs files with kernel descriptors
// (vfs.KernelFiles):
//
//   - sync: pwrite in the caller; fdatasync on one flusher goroutine that
//     serves all partitions per round (group commit), or under the
//     journal one journal write per round (syncjournal.go).
//   - uring (uring.go, the only io_uring loop; package iouring is the bare
//     ring): one owner goroutine collects every partition's appends,
//     writes each partition's queued bytes with one (p)writev and, under
//     FsyncAlways, a linked FSYNC(DATASYNC), all partitions in one
//     io_uring_enter; one chain per partition in flight, the rest
//     accumulates. The HW moves only over each partition's contiguous
//     completed prefix; a failed fsync or I/O error fails the partition,
//     a write out of space rolls it back to that write (uring_undo.go).
//     Under the journal the groups go out without fsyncs and, once
//     written, into one journal write chain per round (uring_journal.go).
//
// Under FsyncAlways the high watermark is the flushed end; otherwise it is
// the written (completed) end. Reads never return bytes at or above it.
// A replicated partition's readable end (ReadReplica, what followers
// fetch) runs ahead of that: both paths move it once the bytes are in the
// segment file, before their barrier, so the leader's and the followers'
// barriers overlap; the ring only over a clean prefix (noteReadable).
// Replication's HW still takes the leader's DurableEnd.
package engine
