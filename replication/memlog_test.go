package replication

import (
	"encoding/binary"
	"fmt"

	"github.com/ringlog/ringlog/engine/epochcache"
)

// memLog is an in-memory Log for tests: one record per batch, whose value
// is a uint64 id. Appends are durable only after flush; crash keeps the
// durable prefix (the --fsync always model: nothing unflushed survives).
type memLog struct {
	start    int64
	entries  []memEntry
	durable  int64
	hw       int64
	cache    *epochcache.Cache
	curEpoch int32
	// autoFlush makes replicated appends durable at once (Fetcher tests).
	autoFlush bool
	// snapshot is the last RestartFromRemote's; restartErr fails it.
	snapshot   []byte
	restartErr error
}

type memEntry struct {
	epoch int32
	val   uint64
}

func newMemLog() *memLog { return &memLog{cache: epochcache.New(), curEpoch: NoEpoch} }

func (l *memLog) LogStartOffset() int64 { return l.start }
func (l *memLog) LogEndOffset() int64   { return l.start + int64(len(l.entries)) }
func (l *memLog) DurableEnd() int64     { return l.durable }
func (l *memLog) HighWatermark() int64  { return l.hw }
func (l *memLog) Position() LogPosition {
	return LogPosition{LogEnd: l.LogEndOffset(), DurableEnd: l.durable, LogStart: l.start}
}
func (l *memLog) LatestEpoch() int32 { return l.cache.LatestEpoch() }
func (l *memLog) EndOffsetForEpoch(e int32) EpochEndOffset {
	ep, off := l.cache.EndOffsetFor(e, l.LogEndOffset())
	return EpochEndOffset{Epoch: ep, EndOffset: off}
}

func (l *memLog) entry(off int64) (memEntry, bool) {
	if off < l.start || off >= l.LogEndOffset() {
		return memEntry{}, false
	}
	return l.entries[off-l.start], true
}

type donePending struct{}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (donePending) Done() <-chan struct{} { return closedCh }
func (donePending) Err() error            { return nil }

func (l *memLog) AppendReplicated(b []byte) (Pending, error) {
	batches, err := decodeBatches(b)
	if err != nil {
		return nil, err
	}
	for _, bt := range batches {
		if bt.offset != l.LogEndOffset() {
			return nil, fmt.Errorf("memlog: batch at %d, log end %d", bt.offset, l.LogEndOffset())
		}
		for range bt.count {
			l.entries = append(l.entries, memEntry{epoch: bt.epoch, val: bt.val})
		}
	}
	if err := l.cache.AssignFromBatches(b); err != nil {
		return nil, err
	}
	if l.autoFlush {
		l.flush()
	}
	return donePending{}, nil
}

func (l *memLog) TruncateTo(off int64) error {
	if off >= l.LogEndOffset() {
		// Still drop epoch entries at the end: see the Log contract.
		return l.cache.TruncateFromEnd(l.LogEndOffset())
	}
	if off < l.start {
		return fmt.Errorf("memlog: truncate to %d below start %d", off, l.start)
	}
	l.entries = l.entries[:off-l.start]
	l.durable = min(l.durable, off)
	l.hw = min(l.hw, off)
	return l.cache.TruncateFromEnd(off)
}

func (l *memLog) TruncateFullyAndStartAt(off int64) error {
	l.start, l.entries, l.durable, l.hw = off, nil, off, off
	return l.cache.Clear()
}

// RestartFromRemote keeps the snapshot for tests to check; the memLog
// has no producer state.
func (l *memLog) RestartFromRemote(off int64, snapshot []byte, epochs []epochcache.Entry) error {
	if l.restartErr != nil {
		return l.restartErr
	}
	var es []epochcache.Entry
	for _, e := range epochs {
		if e.StartOffset < off {
			es = []epochcache.Entry{{Epoch: e.Epoch, StartOffset: off}}
		}
	}
	if err := l.cache.Reset(es); err != nil {
		return err
	}
	l.start, l.entries, l.durable, l.hw = off, nil, off, off
	l.snapshot = snapshot
	return nil
}

func (l *memLog) SetHighWatermark(hw int64) { l.hw = hw }

func (l *memLog) AdvanceLogStart(off int64) (int64, error) {
	if off > l.hw {
		return l.start, fmt.Errorf("memlog: log start %d above hw %d", off, l.hw)
	}
	if off > l.start {
		l.entries = l.entries[off-l.start:]
		l.start = off
	}
	return l.start, nil
}

func (l *memLog) AssignLeaderEpoch(e int32) error {
	l.curEpoch = e
	return l.cache.Assign(e, l.LogEndOffset())
}

// appendLeader is the leader's produce path: one record in curEpoch.
func (l *memLog) appendLeader(val uint64) int64 {
	off := l.LogEndOffset()
	l.entries = append(l.entries, memEntry{epoch: l.curEpoch, val: val})
	return off
}

func (l *memLog) flush() { l.durable = l.LogEndOffset() }

// crash keeps what was flushed, as recovery would; the epoch cache is
// truncated to the recovered end (the engine's duty after recovery).
func (l *memLog) crash() {
	l.entries = l.entries[:l.durable-l.start]
	l.hw = min(l.hw, l.durable)
	if err := l.cache.TruncateFromEnd(l.durable); err != nil {
		panic(err)
	}
	l.curEpoch = NoEpoch
}

// read returns up to maxBatches batches from off (followers read past HW).
func (l *memLog) read(off int64, maxBatches int) []byte {
	var b []byte
	for i := 0; i < maxBatches; i++ {
		e, ok := l.entry(off + int64(i))
		if !ok {
			break
		}
		b = appendBatch(b, off+int64(i), e.epoch, e.val)
	}
	return b
}

type testBatch struct {
	offset int64
	epoch  int32
	val    uint64
	count  int64 // records (lastOffsetDelta+1); appendBatch writes 1
}

// appendBatch writes a v2 batch header (the fields replication and the
// epoch cache read are at their real positions) with one 8-byte record.
func appendBatch(b []byte, offset int64, epoch int32, val uint64) []byte {
	const hdr = 61
	buf := make([]byte, hdr+8)
	binary.BigEndian.PutUint64(buf[0:], uint64(offset))
	binary.BigEndian.PutUint32(buf[8:], uint32(len(buf)-12))
	binary.BigEndian.PutUint32(buf[12:], uint32(epoch))
	buf[16] = 2
	binary.BigEndian.PutUint32(buf[57:], 1)
	binary.BigEndian.PutUint64(buf[hdr:], val)
	return append(b, buf...)
}

func decodeBatches(b []byte) ([]testBatch, error) {
	var out []testBatch
	for len(b) > 0 {
		if len(b) < 69 {
			return nil, fmt.Errorf("short batch: %d bytes", len(b))
		}
		size := int(binary.BigEndian.Uint32(b[8:])) + 12
		if size != 69 || size > len(b) {
			return nil, fmt.Errorf("bad batch size %d", size)
		}
		out = append(out, testBatch{
			offset: int64(binary.BigEndian.Uint64(b[0:])),
			epoch:  int32(binary.BigEndian.Uint32(b[12:])),
			val:    binary.BigEndian.Uint64(b[61:]),
			count:  int64(binary.BigEndian.Uint32(b[23:])) + 1,
		})
		b = b[size:]
	}
	return out, nil
}
