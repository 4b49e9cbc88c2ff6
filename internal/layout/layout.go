// Package layout names every file and directory ringlog keeps in a data
// dir, and reads and writes meta.properties, the data dir's identity. The
// formats are described in engine/doc.go ("On-disk layout"); this is the
// one place the names are spelled.
//
//	<data dir>/
//	    meta.properties                       MetaFile: node.id, cluster.id
//	    cluster.id                            LegacyClusterIDFile: read once, then removed
//	    raft/raft.db, raft/snapshots/         RaftDir, RaftDBFile (hashicorp/raft names snapshots/)
//	    __meta/topics.json                    MetaDir, TopicsFile
//	    recovery-point-offset-checkpoint      RecoveryPointCheckpoint
//	    replication-offset-checkpoint         ReplicationOffsetCheckpoint
//	    log-start-offset-checkpoint           LogStartOffsetCheckpoint
//	    .ringlog-clean-shutdown               CleanShutdownMarker
//	    journal/journal.log                   JournalDir, JournalFile
//	    remote-cache/                         RemoteCacheDir: default --remote-cache-dir
//	    <topic>-<partition>/                  PartitionDir
//	        <base offset, 20 digits>.log      LogSuffix
//	        ....index, ....timeindex          IndexSuffix, TimeIndexSuffix
//	        <offset, 20 digits>.snapshot      SnapshotSuffix
//	        leader-epoch-checkpoint           LeaderEpochCheckpoint
//	        <base>.log.cleaned.tmp            CleanedSuffix: the cleaner's segment copy
//	        <base>.log.tmp                    a follower truncation's segment copy
//	    *.tmp                                 TmpSuffix: an interrupted atomic write
package layout

import (
	"fmt"
	"strconv"

	"github.com/ringlog/ringlog/internal/vfs"
)

// Names directly under the data dir.
const (
	// MetaFile is the data dir's identity (see meta.go).
	MetaFile = "meta.properties"
	// LegacyClusterIDFile is where coordinators before meta.properties held
	// the cluster id; OpenMeta adopts and removes it.
	LegacyClusterIDFile = "cluster.id"
	// RaftDir holds the controller's raft state: RaftDBFile and the
	// "snapshots" directory that hashicorp/raft's file snapshot store makes.
	RaftDir    = "raft"
	RaftDBFile = "raft.db"
	// MetaDir/TopicsFile is the engine's list of local topics.
	MetaDir    = "__meta"
	TopicsFile = "topics.json"
	// RecoveryPointCheckpoint lists each partition's flushed offset.
	RecoveryPointCheckpoint = "recovery-point-offset-checkpoint"
	// ReplicationOffsetCheckpoint lists each partition's high watermark.
	ReplicationOffsetCheckpoint = "replication-offset-checkpoint"
	// LogStartOffsetCheckpoint lists the log start offsets that
	// DeleteRecords moved inside a segment (above its first segment's base).
	LogStartOffsetCheckpoint = "log-start-offset-checkpoint"
	// CleanShutdownMarker is present only after a clean engine Close.
	CleanShutdownMarker = ".ringlog-clean-shutdown"
	// JournalDir/JournalFile is the broker-wide journal of the fsync
	// always path (engine/journal.go); the directory name has no
	// "-<partition>" suffix, so Open never takes it for a topic's.
	JournalDir  = "journal"
	JournalFile = "journal.log"
	// RemoteCacheDir is the default chunk cache of remote-tier reads
	// (tiered/chunkcache, its own file names); its last "-" part is not
	// a number, so Open never takes it for a partition directory.
	RemoteCacheDir = "remote-cache"
)

// Names inside a partition directory.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	// SnapshotSuffix ends a producer-state snapshot, named by the offset
	// it was taken at.
	SnapshotSuffix = ".snapshot"
	// LeaderEpochCheckpoint is the partition's leader-epoch cache.
	LeaderEpochCheckpoint = "leader-epoch-checkpoint"
	// TmpSuffix ends files being written under a temporary name
	// (vfs.WriteFileAtomic); the engine removes leftovers on Open.
	TmpSuffix = vfs.TempSuffix
	// CleanedSuffix names a segment's cleaned copy until the cleaner
	// renames it over the .log; it ends in TmpSuffix so leftovers go too.
	CleanedSuffix = LogSuffix + ".cleaned" + TmpSuffix
)

// OffsetNameDigits is the width of the offset in segment and snapshot names.
const OffsetNameDigits = 20

// OffsetFileName names a file by an offset, zero-padded to
// OffsetNameDigits so names sort as offsets do: segment files (by base
// offset) and producer snapshots.
func OffsetFileName(offset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", offset, suffix)
}

// PartitionDir names a partition's directory under the data dir.
func PartitionDir(topic string, partition int32) string {
	return topic + "-" + strconv.Itoa(int(partition))
}
