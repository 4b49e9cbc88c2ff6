package engine

import (
	"sync"
	"testing"
	"time"
)

func TestCommitWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	busy := commitPacer{streak: journalBusyWrites}
	busy.started(t0)
	idle := busy
	idle.streak = 0
	for _, c := range []struct {
		name     string
		interval time.Duration
		pacer    commitPacer
		pending  int64
		now      time.Time
		want     time.Duration
	}{
		{"busy: waits out the interval", ms, busy, 100, t0.Add(300 * time.Microsecond), 700 * time.Microsecond},
		{"busy, interval over", ms, busy, 100, t0.Add(ms), 0},
		{"busy, long past", ms, busy, 100, t0.Add(time.Second), 0},
		{"not busy", ms, idle, 100, t0, 0},
		{"pacing off", 0, busy, 100, t0, 0},
		{"a full write's worth is pending", ms, busy, journalPacedBytes, t0, 0},
		{"just under a full write's worth", ms, busy, journalPacedBytes - 1, t0, ms},
	} {
		if got := c.pacer.wait(c.interval, func() int64 { return c.pending }, c.now); got != c.want {
			t.Errorf("%s: wait = %v, want %v", c.name, got, c.want)
		}
	}
	var c commitPacer
	for i, w := range []struct {
		records int
		more    bool
		busy    bool
	}{
		{50, true, false},
		{50, true, true}, // journalBusyWrites in a row
		{50, true, true},
		{journalBusyRecords, true, true},
		{50, false, false}, // the writers wait for this write
		{50, true, false},
		{50, true, true},
		{journalBusyRecords - 1, true, false}, // light load
		{50, true, false},
	} {
		c.written(w.records, w.more)
		if c.busy() != w.busy {
			t.Errorf("write %d (%d records, more pending %v): busy %v, want %v", i, w.records, w.more, c.busy(), w.busy)
		}
	}
}

// TestJournalCommitPacing: while appends keep arriving during journal
// writes, the writes start at most once per JournalCommitInterval, on both
// write paths; the same load without pacing writes many times more often
// (so the load did keep the journal busy). A producer that waits for its
// answer before it sends more (one request in flight, all partitions in
// it) is not held, nor is a single appender.
func TestJournalCommitPacing(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		open := func(interval time.Duration, parts int) (*Engine, []*Partition) {
			cfg := ioConfig(t.TempDir(), mode)
			cfg.Fsync = FsyncAlways
			cfg.Journal = true
			cfg.JournalCommitInterval = interval
			cfg.JournalBytes = 16 << 20 // one write carries an interval's appends
			e := mustOpen(t, cfg)
			checkIOPath(t, e, mode)
			if _, err := e.CreateTopic("pace", int32(parts), nil); err != nil {
				e.Close()
				t.Fatal(err)
			}
			ps := make([]*Partition, parts)
			for i := range ps {
				ps[i] = mustPartition(t, e, "pace", int32(i))
			}
			return e, ps
		}
		const window = time.Second
		waitAll := func(ws []AppendWaiter) {
			for _, w := range ws {
				if _, err := w.Result(); err != nil {
					t.Errorf("append: %v", err)
				}
			}
		}
		// stream runs 32 producers, one per partition, each appending once
		// a millisecond whatever the answers (open loop), for window, and
		// counts the journal writes. Every write finds several partitions
		// with appends waiting.
		stream := func(interval time.Duration) int64 {
			e, ps := open(interval, 32)
			defer e.Close()
			before := e.Stats().JournalWrites
			start := time.Now()
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var ws []AppendWaiter
					for i := int64(0); i < int64(window/time.Millisecond); i++ {
						time.Sleep(time.Until(start.Add(time.Duration(i) * time.Millisecond)))
						w, err := p.Append(batchOf(i, 1))
						if err != nil {
							t.Errorf("append: %v", err)
							break
						}
						ws = append(ws, w)
					}
					waitAll(ws)
				}()
			}
			wg.Wait()
			return e.Stats().JournalWrites - before
		}
		// request runs one producer that appends to eight partitions and
		// waits for all eight answers before the next round, for window.
		request := func(interval time.Duration) int64 {
			e, ps := open(interval, 8)
			defer e.Close()
			before := e.Stats().JournalWrites
			end := time.Now().Add(window)
			for i := int64(0); i < 20000 && time.Now().Before(end); i++ {
				ws := make([]AppendWaiter, 0, len(ps))
				for _, p := range ps {
					w, err := p.Append(batchOf(i, 1))
					if err != nil {
						t.Fatalf("append: %v", err)
					}
					ws = append(ws, w)
				}
				waitAll(ws)
			}
			return e.Stats().JournalWrites - before
		}
		const interval = 50 * time.Millisecond
		// At most one write per interval while busy, and one at once
		// each time the journal fell idle (a flight that no append
		// overlapped, more often on a slow or crowded machine): three
		// per interval, and a few, bound that.
		bound := int64(3*window/interval) + 4
		paced := stream(interval)
		unpaced := stream(0)
		// Held, the producer's rounds would be maxJournalCommitInterval
		// apart, two writes each (one append, then the other seven).
		waiting := request(maxJournalCommitInterval)
		heldBound := int64(2*window/maxJournalCommitInterval) + 4
		t.Logf("%s, %d journal writes in %v: %d paced at %v, %d unpaced, %d with one producer waiting for its answers", mode, paced+unpaced+waiting, window, paced, interval, unpaced, waiting)
		if paced > bound {
			t.Errorf("paced at %v: %d journal writes in %v, want at most %d", interval, paced, window, bound)
		}
		if unpaced <= bound {
			t.Errorf("unpaced: only %d journal writes in %v: the load did not keep the journal busy, and the paced count proves nothing", unpaced, window)
		}
		if waiting <= heldBound {
			t.Errorf("a producer waiting for its answers: %d journal writes in %v, at most %d: it was held", waiting, window, heldBound)
		}

		// Light load: every write carries one record, so none waits, even
		// at the longest interval (waiting would take 30 x 100 ms).
		e, ps := open(maxJournalCommitInterval, 1)
		defer e.Close()
		start := time.Now()
		for i := int64(0); i < 30; i++ {
			appendWait(t, ps[0], batchOf(i, 1))
		}
		if d := time.Since(start); d > 30*maxJournalCommitInterval/2 {
			t.Errorf("30 appends one at a time took %v: a lightly loaded journal was held", d)
		}
	})
}
