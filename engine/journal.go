package engine

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/vfs"
)

// The broker-wide journal (doc.go, "Journal"): under FsyncAlways every
// round's appends, of every partition, are written once more into one
// preallocated file, and one fdatasync of that file is the round's
// durability barrier instead of one per dirty segment. Segments are
// written without a sync and made durable in the background by
// checkpoints; Open replays the journal tail into them after a crash.
//
// One writer at a time (the sync path's flusher or the ring owner) plans
// and issues journal writes, at most one in flight, so the journal is
// always a prefix of complete writes followed by at most one torn one.

const (
	journalDataStart = 4096 // the header block: two checkpoint slots
	journalSlotSize  = 512
	journalSlotMagic = 0x524c4a48 // "RLJH"
	journalRecMagic  = 0x524c4a52 // "RLJR"
	// Version 2 (doc.go, "Journal"): every write starts on a
	// journalBlock boundary and its last record carries journalFlagLast,
	// after which replay goes on at the next boundary. Version 1 journals
	// (records back to back) are still replayed.
	journalVersion  = 2
	journalBlock    = 4096 // O_DIRECT alignment of every journal write
	journalFlagLast = 1    // the record ends its write (version 2)
	journalRecFixed = 40   // record header before the partition name
	journalKindData = 1
	journalKindWrap = 2 // the rest of the file is skipped: go on at journalDataStart
	journalMaxName  = 512
	// journalSeqGap is added to the next sequence number at every Open:
	// records of a write torn by the crash may lie after the replayed end
	// with the sequence numbers that come next, and the new stream must
	// never continue into them.
	journalSeqGap = 1 << 32
	// MinJournalBytes is the smallest Config.JournalBytes.
	MinJournalBytes = 64 << 10
	// A checkpoint starts when journalCheckpointBytes or
	// 1/journalCheckpointShare of the journal, whichever is less, was
	// written since the last one. A checkpoint's writeback competes with
	// the journal's own fdatasyncs for the disk, so many small ones stall
	// rounds less than a few large ones (1 broker, 8 partitions, 20k
	// msg/s keyed on this VM, side by side: ack p99 30 ms at 8 MiB per
	// checkpoint, 7.5-7.8 ms at 1 MiB, 7.6-10 ms at 256 KiB, where the
	// fixed cost per checkpoint starts to show; 18.8 ms at half of
	// 64 MiB).
	journalCheckpointShare = 8
	journalCheckpointBytes = 1 << 20
	// checkpointSyncers bounds the segment fdatasyncs a checkpoint runs
	// at once: parallel ones cost 23 ms for 256 files here, sequential
	// ones 150 ms.
	checkpointSyncers = 32
	// Group commit's pacing (Config.JournalCommitInterval) applies while
	// the journal is busy: journalBusyWrites writes in a row each carried
	// journalBusyRecords records (one per segment write it made durable)
	// and saw more arrive while in flight. A write of one record means the
	// load is light; none arriving means the writers wait for this write's answer
	// (a producer with one request in flight, whose request may straddle
	// one write but not a row of them), and waiting would only add
	// latency. Nor does a write wait that already carries
	// journalPacedBytes.
	journalBusyWrites        = 2
	journalBusyRecords       = 2
	journalPacedBytes        = 256 << 10
	maxJournalCommitInterval = 100 * time.Millisecond
)

// commitPacer paces group commit (Config.JournalCommitInterval): it
// tells whether the journal is busy (journalBusyWrites busy writes in a
// row) and how long the next write waits. One per write path; its
// writer's goroutine only.
type commitPacer struct {
	streak    int
	lastStart time.Time
}

// started notes that a journal write started at t.
func (c *commitPacer) started(t time.Time) { c.lastStart = t }

// written notes a completed journal write of records records, with more
// pending at its end or not.
func (c *commitPacer) written(records int, morePending bool) {
	if records >= journalBusyRecords && morePending {
		c.streak++
	} else {
		c.streak = 0
	}
}

// wait is how long the next journal write waits for more appends: until
// interval after the last write started, while the journal is busy and
// what is pending (asked only then) is under journalPacedBytes; else 0.
// At 20k msg/s on three brokers sharing two cores, a write at most every
// 1 ms instead of back to back cost the brokers about a tenth less CPU,
// at about 0.6 ms more ack p50 and the same p99 (BENCHMARKS.md section
// 31).
func (c *commitPacer) wait(interval time.Duration, pending func() int64, now time.Time) time.Duration {
	if interval <= 0 || !c.busy() || pending() >= journalPacedBytes {
		return 0
	}
	return max(0, c.lastStart.Add(interval).Sub(now))
}

func (c *commitPacer) busy() bool { return c.streak >= journalBusyWrites }

var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// jcut is a point in the journal: the physical position of the next
// record, its sequence number, and the logical byte count (bytes consumed
// since Open, wrapped tails included) that measures fill.
type jcut struct {
	pos int64
	seq uint64
	l   int64
	d   int64 // record bytes consumed since Open, without padding
}

// jrec is one record: n bytes (bufs, back to back) that land at pos in seg.
type jrec struct {
	p    *Partition
	name string // partition directory name
	seg  *segment
	pos  int64
	bufs [][]byte
	n    int64
}

func (r *jrec) size() int64 { return journalRecFixed + int64(len(r.name)) + r.n }

// jwrite is one planned journal write: an optional wrap marker block at
// wrapPos, then buf (header, data, header, data, ..., zero padding to a
// journalBlock boundary) at pos. Both are journalBlock-aligned in memory,
// offset and length, for O_DIRECT.
type jwrite struct {
	wrapPos int64 // -1: none
	wrapHdr []byte
	pos     int64
	buf     []byte
	n       int64 // len(buf)
	recs    []jrec
	end     jcut
}

type journal struct {
	e        *Engine
	wplan    jwrite // what plan returns, reused write to write
	path     string
	f        vfs.File
	size     int64
	capacity int64  // size - journalDataStart
	maxWrite int64  // bytes of records one write may carry
	version  uint32 // of the journal found at Open (replay rules)

	// dfd, when not -1, is the journal opened O_DIRECT: record writes go
	// through it with RWF_DSYNC, each write its own barrier, completed by
	// the kernel without a worker thread (buffered writes and their
	// fdatasync run on io_uring's io-wq workers, or block the writer on
	// the sync path). Only on the OS file system; the others (and a
	// file system refusing O_DIRECT) write through f and fdatasync.
	dfd int
	// Writer-owned aligned buffers, reused: at most one write is in flight.
	wbuf  []byte
	wrapB []byte

	// Writer-owned: where the next write goes.
	head jcut

	ckMu    sync.Mutex // serializes checkpoints
	mu      sync.Mutex
	cond    *sync.Cond
	start   jcut // checkpointed start: records before it are in durable segments
	settled jcut // end of the last completed write
	dirty   map[*segment]*Partition
	slotGen uint64
	failed  error
	// spaceWanted: a write did not fit; the next checkpoint is due.
	spaceWanted bool
	// wake, when set (the ring owner), is called after a checkpoint freed
	// space.
	wake func()

	// The data dir's descriptor for syncfs (opened on first use).
	sfOnce sync.Once
	sfFd   int
	sfErr  error

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// journalPath is the journal file of a data dir.
func journalPath(dir string) string {
	return filepath.Join(dir, layout.JournalDir, layout.JournalFile)
}

// openJournal recovers the data dir's journal if there is one (replaying
// its tail into the segments) and, when the journal is in use
// (FsyncAlways and Config.Journal), returns it ready for writes, creating
// it first if needed. It runs before the partitions load.
func openJournal(e *Engine) (*journal, error) {
	path := journalPath(e.cfg.Dir)
	use := e.cfg.Fsync == FsyncAlways && e.cfg.Journal
	_, statErr := e.fs.Stat(path)
	exists := statErr == nil
	if !exists && !use {
		return nil, nil
	}
	j := &journal{e: e, path: path, dfd: -1, dirty: map[*segment]*Partition{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	j.cond = sync.NewCond(&j.mu)
	if exists {
		f, err := e.fs.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		j.f = f
		if j.size, err = f.Size(); err != nil {
			f.Close()
			return nil, err
		}
		if err := j.recover(); err != nil {
			f.Close()
			return nil, err
		}
		if !use {
			// FsyncAlways was given up: what the journal held is in the
			// segments now and the file is left as it is.
			return nil, f.Close()
		}
		if j.size != e.cfg.JournalBytes {
			f.Close()
			j.f = nil
			e.log.Info("resizing the journal", "path", path, "from", j.size, "to", e.cfg.JournalBytes)
		}
	}
	if j.f == nil {
		if err := j.create(e.cfg.JournalBytes); err != nil {
			return nil, err
		}
	}
	j.capacity = j.size - journalDataStart
	j.maxWrite = j.capacity / 4
	j.head = j.start
	j.settled = j.start
	if e.fs == vfs.Default {
		j.openSyncfs() // now: writeback errors count from here
		if !e.cfg.JournalBuffered {
			j.openDirect()
		}
	}
	go j.run()
	return j, nil
}

// create writes a zero-filled journal of size bytes with an empty
// checkpoint, durably (file and directory entries), so later overwrites
// need no metadata commit. It is written under a temporary name and
// renamed into place: a crash during creation leaves no journal without
// a valid checkpoint slot.
func (j *journal) create(size int64) error {
	fs := j.e.fs
	dir := filepath.Dir(j.path)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := j.path + tmpSuffix
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		f.Close()
		fs.Remove(tmp)
		return fmt.Errorf("%w: creating the %d-byte journal %s (Config.JournalBytes, serve --journal-bytes): %v", ErrStorage, size, j.path, err)
	}
	zero := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero[:min(int64(len(zero)), size-off)], off); err != nil {
			return fail(err)
		}
	}
	j.f, j.size = f, size
	j.start = jcut{pos: journalDataStart, seq: 1}
	j.version = journalVersion
	if err := j.writeSlot(j.start); err != nil {
		return fail(err)
	}
	if err := fs.Rename(tmp, j.path); err != nil {
		return fail(err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fail(err)
	}
	if err := fs.SyncDir(j.e.cfg.Dir); err != nil {
		return fail(err)
	}
	return nil
}

// writeSlot durably records c as the journal's start in the older of the
// two header slots.
func (j *journal) writeSlot(c jcut) error {
	j.slotGen++
	b := make([]byte, journalSlotSize)
	be.PutUint32(b[0:], journalSlotMagic)
	be.PutUint32(b[4:], journalVersion)
	be.PutUint64(b[12:], j.slotGen)
	be.PutUint64(b[20:], uint64(c.pos))
	be.PutUint64(b[28:], c.seq)
	be.PutUint64(b[36:], uint64(j.size))
	be.PutUint32(b[8:], crc32.Checksum(b[12:44], journalCRC))
	if _, err := j.f.WriteAt(b, int64(j.slotGen%2)*journalSlotSize); err != nil {
		return fmt.Errorf("%w: writing %s: %v", ErrStorage, j.path, err)
	}
	if err := j.f.Datasync(); err != nil {
		return fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, j.path, err)
	}
	return nil
}

// readSlots returns the newest valid checkpoint slot.
func (j *journal) readSlots() (jcut, error) {
	var best jcut
	found := false
	b := make([]byte, journalSlotSize)
	for i := int64(0); i < 2; i++ {
		if _, err := j.f.ReadAt(b, i*journalSlotSize); err != nil && !errors.Is(err, io.EOF) {
			return jcut{}, fmt.Errorf("%w: reading %s: %v", ErrStorage, j.path, err)
		}
		v := be.Uint32(b[4:])
		if be.Uint32(b[0:]) != journalSlotMagic || v < 1 || v > journalVersion ||
			be.Uint32(b[8:]) != crc32.Checksum(b[12:44], journalCRC) {
			continue
		}
		gen, pos, seq, size := be.Uint64(b[12:]), int64(be.Uint64(b[20:])), be.Uint64(b[28:]), int64(be.Uint64(b[36:]))
		if size != j.size || pos < journalDataStart || pos > size {
			continue
		}
		if !found || gen > j.slotGen {
			best, j.slotGen, found = jcut{pos: pos, seq: seq}, gen, true
			j.version = v
		}
	}
	if !found {
		// Both slots are written before any record: a journal without a
		// valid one was never used, or is not ours.
		return jcut{}, fmt.Errorf("%w: %s: no valid checkpoint slot", ErrCorruptLog, j.path)
	}
	return best, nil
}

// recover replays the records after the checkpoint, while they are valid
// and their sequence numbers continue, into their segments, makes what it
// wrote durable and checkpoints at the scan's end. A record whose segment
// is gone, or no longer its partition's last (rolled: fdatasynced in
// full before the next segment was created, and maybe rewritten by the
// cleaner since), is skipped.
func (j *journal) recover() error {
	start, err := j.readSlots()
	if err != nil {
		return err
	}
	pos, seq := start.pos, start.seq
	type target struct {
		last  int64 // base of the partition's last segment, -1: none
		files map[int64]vfs.File
	}
	targets := map[string]*target{}
	var touched []vfs.File
	defer func() {
		for _, f := range touched {
			f.Close()
		}
	}()
	hdr := make([]byte, journalRecFixed+journalMaxName)
	var data []byte
	records, bytes := 0, int64(0)
	for {
		// Where a write could not start, the writer wrapped. In version
		// 2 writes start on block boundaries, and a record inside a write
		// may start anywhere up to the end of the file.
		if j.version < 2 && j.size-pos < journalRecFixed || j.version >= 2 && pos%journalBlock == 0 && j.size-pos < journalBlock {
			pos = journalDataStart
		}
		h := hdr[:journalRecFixed]
		if _, err := j.f.ReadAt(h, pos); err != nil {
			break
		}
		nameLen, dataLen := int64(be.Uint16(h[18:])), int64(be.Uint32(h[20:]))
		if be.Uint32(h[0:]) != journalRecMagic || be.Uint64(h[8:]) != seq || nameLen > journalMaxName ||
			pos+journalRecFixed+nameLen+dataLen > j.size {
			break
		}
		kind := h[16]
		h = hdr[:journalRecFixed+nameLen]
		if _, err := j.f.ReadAt(h[journalRecFixed:], pos+journalRecFixed); err != nil {
			break
		}
		if int64(cap(data)) < dataLen {
			data = make([]byte, dataLen)
		}
		data = data[:dataLen]
		if _, err := j.f.ReadAt(data, pos+journalRecFixed+nameLen); err != nil {
			break
		}
		sum := crc32.Update(crc32.Checksum(h[8:], journalCRC), journalCRC, data)
		if sum != be.Uint32(h[4:]) {
			break
		}
		seq++
		if kind == journalKindWrap {
			pos = journalDataStart
			continue
		}
		name := string(h[journalRecFixed:])
		if kind != journalKindData || name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			return fmt.Errorf("%w: %s at byte %d: bad record (kind %d, partition %q)", ErrCorruptLog, j.path, pos, kind, name)
		}
		pos += journalRecFixed + nameLen + dataLen
		if j.version >= 2 && h[17]&journalFlagLast != 0 {
			pos = alignJournal(pos)
		}
		base, at := int64(be.Uint64(h[24:])), int64(be.Uint64(h[32:]))
		t := targets[name]
		if t == nil {
			t = &target{last: -1, files: map[int64]vfs.File{}}
			if bases, err := listSegments(j.e.fs, filepath.Join(j.e.cfg.Dir, name)); err == nil && len(bases) > 0 {
				t.last = bases[len(bases)-1]
			}
			targets[name] = t
		}
		if base != t.last {
			continue
		}
		f := t.files[base]
		if f == nil {
			if f, err = j.e.fs.OpenFile(filepath.Join(j.e.cfg.Dir, name, segmentName(base, logSuffix)), os.O_RDWR, 0); err != nil {
				return fmt.Errorf("%w: replaying %s: %v", ErrStorage, j.path, err)
			}
			t.files[base] = f
			touched = append(touched, f)
		}
		if _, err := f.WriteAt(data, at); err != nil {
			return fmt.Errorf("%w: replaying %s into %s: %v", ErrStorage, j.path, f.Name(), err)
		}
		records++
		bytes += dataLen
	}
	for _, f := range touched {
		if err := f.Datasync(); err != nil {
			return fmt.Errorf("%w: fdatasync %s after replay: %v", ErrStorage, f.Name(), err)
		}
	}
	if records > 0 {
		j.e.log.Info("replayed the journal into the segments", "path", j.path, "records", records, "bytes", bytes, "segments", len(touched))
	}
	j.e.stats.journalReplayed.Add(int64(records))
	// New writes start on a block boundary (a torn write may have ended
	// the scan inside a block), with sequence numbers no record of the
	// torn write can carry, in a version 2 slot.
	pos = alignJournal(pos)
	if j.size-pos < journalBlock {
		pos = journalDataStart
	}
	j.start = jcut{pos: pos, seq: seq + journalSeqGap}
	j.version = journalVersion
	return j.writeSlot(j.start)
}

// alignJournal rounds a journal offset up to a journalBlock boundary.
func alignJournal(n int64) int64 { return (n + journalBlock - 1) &^ (journalBlock - 1) }

// alignedBuf returns n bytes (n a multiple of journalBlock) whose address
// is journalBlock-aligned, as O_DIRECT needs. The Go heap does not move
// objects, so the alignment holds for the buffer's life.
func alignedBuf(n int64) []byte {
	b := make([]byte, n+journalBlock)
	off := int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (journalBlock - 1))
	if off != 0 {
		off = journalBlock - off
	}
	return b[off : off+n : off+n]
}

// openDirect opens the journal a second time with O_DIRECT for record
// writes, if the file system takes it (a probe read of the header block
// tells: tmpfs and some others refuse O_DIRECT).
func (j *journal) openDirect() {
	fd, err := unix.Open(j.path, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		j.e.log.Info("journal: O_DIRECT refused, writing through the page cache with fdatasync", "path", j.path, "err", err)
		return
	}
	probe := alignedBuf(journalBlock)
	if _, err := unix.Pread(fd, probe, 0); err != nil {
		unix.Close(fd)
		j.e.log.Info("journal: O_DIRECT read failed, writing through the page cache with fdatasync", "path", j.path, "err", err)
		return
	}
	j.dfd = fd
}

// Direct reports whether record writes go O_DIRECT with RWF_DSYNC.
func (j *journal) direct() bool { return j.dfd >= 0 }

// fits reports whether a record of n bytes may ever go into one write.
func (j *journal) fits(n int64) bool { return n <= j.maxWrite }

// plan lays out the next write for recs (their total within maxWrite),
// assigning sequence numbers, copies them into the writer's aligned
// buffer and moves the head past it. It returns nil when the write does
// not fit before the checkpointed start: the caller kicks a checkpoint and
// tries again once it freed space. Writer only; the previous write must
// have completed (the buffer is reused).
func (j *journal) plan(recs []jrec) *jwrite {
	var n int64
	for i := range recs {
		n += recs[i].size()
	}
	padded := alignJournal(n)
	h := j.head
	// The one write planned at a time, reused: see above.
	w := &j.wplan
	*w = jwrite{wrapPos: -1, recs: recs, n: padded}
	need := padded
	wrap := h.pos+padded > j.size
	if wrap {
		need += j.size - h.pos // the skipped tail
	}
	j.mu.Lock()
	free := j.capacity - (h.l - j.start.l)
	if need > free {
		// The checkpoint this asks for runs whatever dueLocked's
		// thresholds say.
		j.spaceWanted = true
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()
	if wrap {
		if j.size-h.pos >= journalBlock {
			if j.wrapB == nil {
				j.wrapB = alignedBuf(journalBlock)
			}
			w.wrapPos = h.pos
			w.wrapHdr = j.wrapB
			clear(w.wrapHdr)
			putJournalHeader(w.wrapHdr, h.seq, journalKindWrap, journalFlagLast, "", 0, 0, nil)
			h.seq++
		}
		h.l += j.size - h.pos
		h.pos = journalDataStart
	}
	w.pos = h.pos
	if int64(len(j.wbuf)) < padded {
		j.wbuf = alignedBuf(max(padded, min(2*int64(len(j.wbuf)), alignJournal(j.maxWrite)), 64<<10))
	}
	buf := j.wbuf[:padded]
	off := 0
	for i := range recs {
		r := &recs[i]
		var flags byte
		if i == len(recs)-1 {
			flags = journalFlagLast
		}
		hl := journalRecFixed + len(r.name)
		putJournalHeader(buf[off:off+hl], h.seq, journalKindData, flags, r.name, r.seg.base, r.pos, r.bufs)
		off += hl
		for _, b := range r.bufs {
			off += copy(buf[off:], b)
		}
		h.seq++
	}
	clear(buf[off:])
	w.buf = buf
	h.pos += padded
	h.l += padded
	h.d += n
	w.end = h
	j.head = h
	return w
}

// putJournalHeader fills a record header (doc.go) over name and data.
func putJournalHeader(b []byte, seq uint64, kind, flags byte, name string, base, pos int64, data [][]byte) {
	var n int
	for _, d := range data {
		n += len(d)
	}
	be.PutUint32(b[0:], journalRecMagic)
	be.PutUint64(b[8:], seq)
	b[16], b[17] = kind, flags
	be.PutUint16(b[18:], uint16(len(name)))
	be.PutUint32(b[20:], uint32(n))
	be.PutUint64(b[24:], uint64(base))
	be.PutUint64(b[32:], uint64(pos))
	copy(b[journalRecFixed:], name)
	sum := crc32.Checksum(b[8:journalRecFixed+len(name)], journalCRC)
	for _, d := range data {
		sum = crc32.Update(sum, journalCRC, d)
	}
	be.PutUint32(b[4:], sum)
}

// writeSync issues w (the sync path): with pwrite and RWF_DSYNC through
// the O_DIRECT descriptor, or with pwrite and one fdatasync. Writer only.
func (j *journal) writeSync(w *jwrite) error {
	if j.direct() {
		if w.wrapPos >= 0 {
			if err := pwriteDsync(j.dfd, w.wrapHdr, w.wrapPos); err != nil {
				return fmt.Errorf("%w: write %s at %d: %v", ErrStorage, j.path, w.wrapPos, err)
			}
		}
		if err := pwriteDsync(j.dfd, w.buf, w.pos); err != nil {
			return fmt.Errorf("%w: write %s at %d: %v", ErrStorage, j.path, w.pos, err)
		}
		return nil
	}
	if w.wrapPos >= 0 {
		if _, err := j.f.WriteAt(w.wrapHdr, w.wrapPos); err != nil {
			return fmt.Errorf("%w: write %s at %d: %v", ErrStorage, j.path, w.wrapPos, err)
		}
	}
	if _, err := j.f.WriteAt(w.buf, w.pos); err != nil {
		return fmt.Errorf("%w: write %s at %d: %v", ErrStorage, j.path, w.pos, err)
	}
	if err := j.f.Datasync(); err != nil {
		return fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, j.path, err)
	}
	return nil
}

// pwriteDsync writes b at off with RWF_DSYNC. An O_DIRECT write is not
// continued after a short write (the rest would be unaligned): that fails.
func pwriteDsync(fd int, b []byte, off int64) error {
	for {
		n, err := unix.Pwritev2(fd, [][]byte{b}, off, unix.RWF_DSYNC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n != len(b) {
			return fmt.Errorf("short write %d of %d", n, len(b))
		}
		return nil
	}
}

// settle records that w is durable: its segments join the next
// checkpoint's fdatasyncs, and a checkpoint starts once enough was
// written since the last one (journalCheckpointBytes).
func (j *journal) settle(w *jwrite) {
	st := &j.e.stats
	st.journalWrites.Add(1)
	st.journalBytes.Add(w.n)
	st.journalRecords.Add(int64(len(w.recs)))
	j.mu.Lock()
	j.settled = w.end
	for i := range w.recs {
		s := w.recs[i].seg
		if _, ok := j.dirty[s]; !ok {
			s.acquire()
			j.dirty[s] = w.recs[i].p
		}
	}
	due := j.dueLocked()
	j.cond.Broadcast()
	j.mu.Unlock()
	if due {
		j.kickCheckpoint()
	}
}

// fail makes the journal refuse further writes: after a failed write or
// fdatasync its contents are unknown until the next Open.
func (j *journal) fail(err error) {
	j.mu.Lock()
	if j.failed == nil {
		j.failed = err
		j.e.log.Error("journal failed; appends under fsync always are refused until restart", "path", j.path, "err", err)
	}
	j.cond.Broadcast()
	wake := j.wake
	j.mu.Unlock()
	if wake != nil {
		wake() // the owner fails what waits for the journal
	}
}

func (j *journal) err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// fill is the share of the journal between the checkpoint and the last
// completed write.
func (j *journal) fill() float64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return float64(j.settled.l-j.start.l) / float64(j.capacity)
}

// dueLocked reports whether enough was written since the last
// checkpoint for the next one. j.mu must be held.
//
// Records count without the padding that ends every write on a block:
// at a few hundred bytes per round, the padding alone would run a
// checkpoint every 256 writes. The journal's fill does count it, and
// past three quarters a checkpoint runs whatever the records amount to.
func (j *journal) dueLocked() bool {
	return j.spaceWanted || j.settled.d-j.start.d > min(j.capacity/journalCheckpointShare, journalCheckpointBytes) ||
		j.settled.l-j.start.l > j.capacity/4*3
}

func (j *journal) kickCheckpoint() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// run checkpoints in the background when kicked.
func (j *journal) run() {
	defer close(j.done)
	for {
		select {
		case <-j.kick:
			// Writes settled while the last checkpoint ran kicked again;
			// run only if that amounts to a checkpoint's worth, or
			// checkpoints would run back to back (256 dirty segments:
			// 100 per second, each a syncfs, instead of 20).
			j.mu.Lock()
			due := j.dueLocked()
			j.mu.Unlock()
			if due {
				j.checkpoint()
			}
		case <-j.stop:
			return
		}
	}
}

// waitSpace blocks until a checkpoint ran after the call or the journal
// failed (the sync path's writer, when a write did not fit).
func (j *journal) waitSpace() error {
	j.mu.Lock()
	startL := j.start.l
	j.mu.Unlock()
	j.kickCheckpoint()
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.start.l == startL && j.failed == nil && j.settled.l != j.start.l {
		j.cond.Wait()
	}
	return j.failed
}

func (j *journal) openSyncfs() {
	j.sfOnce.Do(func() {
		j.sfFd, j.sfErr = unix.Open(j.e.cfg.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
}

// syncfs flushes the file system holding the data dir. The descriptor
// is opened once, with the journal: syncfs reports the file system's
// writeback errors since its descriptor was opened, so one opened per
// call would miss an error from the kernel's background writeback of a
// segment between two checkpoints, and the checkpoint would move the
// start past records whose segment bytes were lost. On an error the
// caller's per-segment fdatasyncs find the partition.
func (j *journal) syncfs() error {
	j.openSyncfs()
	if j.sfErr != nil {
		return j.sfErr
	}
	return unix.Syncfs(j.sfFd)
}

// journalCheckpointHook, when set (tests only), runs at the start of every
// checkpoint that has work: tests hold checkpoints back with it.
var journalCheckpointHook func()

// checkpoint makes every segment written by settled records durable and
// then moves the journal's start past them. It takes no partition lock:
// truncations call it holding one.
func (j *journal) checkpoint() error {
	j.ckMu.Lock()
	defer j.ckMu.Unlock()
	j.mu.Lock()
	cut, segs, failed := j.settled, j.dirty, j.failed
	if failed == nil {
		j.dirty = map[*segment]*Partition{}
	}
	same := cut.l == j.start.l
	j.mu.Unlock()
	if failed != nil {
		return failed
	}
	if same && len(segs) == 0 {
		return nil
	}
	if journalCheckpointHook != nil {
		journalCheckpointHook()
	}
	t0 := time.Now()
	if j.e.fs == vfs.Default && len(segs) > 1 && j.syncfs() == nil {
		// One syncfs flushes every dirty segment with one file-system
		// journal commit, where each fdatasync of a grown file commits
		// its own (256 files here: 11 ms against 23 in parallel). On an
		// error the fdatasyncs below find the partition it belongs to.
		for s := range segs {
			s.release()
		}
		segs = nil
	}
	sem := make(chan struct{}, checkpointSyncers)
	var wg sync.WaitGroup
	for s, p := range segs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.log.Datasync(); err != nil {
				// Fatal for the partition, as a failed fdatasync always
				// is, not for the others: it goes offline (async: the
				// caller may hold its lock) and the start moves on. What
				// the kernel dropped of it since the last checkpoint is
				// then only on its replicas.
				err = fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, s.path(logSuffix), err)
				if p != nil {
					go p.failLocked(err)
				}
			}
			j.e.stats.fdatasyncs.Add(1)
			s.release()
		}()
	}
	wg.Wait()
	if err := j.writeSlot(cut); err != nil {
		j.fail(err)
		return err
	}
	j.e.stats.journalCheckpoints.Add(1)
	j.e.stats.journalCheckpointNanos.Add(int64(time.Since(t0)))
	j.mu.Lock()
	j.start = cut
	j.spaceWanted = false
	j.cond.Broadcast()
	wake := j.wake
	j.mu.Unlock()
	if wake != nil {
		wake()
	}
	return nil
}

// close checkpoints what the last writes left and closes the file. The
// write path is closed already.
func (j *journal) close() error {
	j.closeOnce.Do(func() { j.closeErr = j.doClose() })
	return j.closeErr
}

func (j *journal) doClose() error {
	close(j.stop)
	<-j.done
	err := j.checkpoint()
	j.mu.Lock()
	for s := range j.dirty {
		s.release()
	}
	j.dirty = nil
	j.mu.Unlock()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	if j.dfd >= 0 {
		unix.Close(j.dfd)
		j.dfd = -1
	}
	if j.sfErr == nil && j.sfFd > 0 {
		unix.Close(j.sfFd)
	}
	return err
}

// dirName is the partition's directory name, which journal records carry.
func (p *Partition) dirName() string { return filepath.Base(p.dir) }
