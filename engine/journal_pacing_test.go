package engine

import (
	"sync"
	"testing"
	"time"
)

func TestCommitWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, c := range []struct {
		name     string
		interval time.Duration
		records  int
		pending  int64
		now      time.Time
		want     time.Duration
	}{
		{"busy: waits out the interval", ms, journalBusyRecords, 100, t0.Add(300 * time.Microsecond), 700 * time.Microsecond},
		{"busy, interval over", ms, 9, 100, t0.Add(ms), 0},
		{"busy, long past", ms, 9, 100, t0.Add(time.Second), 0},
		{"light: the last write carried too few", ms, journalBusyRecords - 1, 100, t0, 0},
		{"pacing off", 0, 50, 100, t0, 0},
		{"a full write's worth is pending", ms, 50, journalPacedBytes, t0, 0},
		{"just under a full write's worth", ms, 50, journalPacedBytes - 1, t0, ms},
	} {
		if got := commitWait(c.interval, t0, c.records, c.pending, c.now); got != c.want {
			t.Errorf("%s: commitWait = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestJournalCommitPacing: while appends keep the journal busy, its
// writes start at most once per JournalCommitInterval, on both write
// paths; the same load without pacing writes many times more often (so
// the workload did keep it busy), and a single appender is never held.
func TestJournalCommitPacing(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		open := func(interval time.Duration) (*Engine, []*Partition) {
			cfg := ioConfig(t.TempDir(), mode)
			cfg.Fsync = FsyncAlways
			cfg.Journal = true
			cfg.JournalCommitInterval = interval
			e := mustOpen(t, cfg)
			checkIOPath(t, e, mode)
			if _, err := e.CreateTopic("pace", 8, nil); err != nil {
				e.Close()
				t.Fatal(err)
			}
			ps := make([]*Partition, 8)
			for i := range ps {
				ps[i] = mustPartition(t, e, "pace", int32(i))
			}
			return e, ps
		}
		// busyWrites runs eight appenders, one per partition, each
		// appending and waiting in a loop for window, and counts the
		// journal writes.
		const window = time.Second
		busyWrites := func(interval time.Duration) int64 {
			e, ps := open(interval)
			defer e.Close()
			before := e.Stats().JournalWrites
			end := time.Now().Add(window)
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int64(0); i < 20000 && time.Now().Before(end); i++ {
						w, err := p.Append(batchOf(i, 1))
						if err == nil {
							_, err = w.Result()
						}
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			return e.Stats().JournalWrites - before
		}
		const interval = 50 * time.Millisecond
		// One write at once while the journal is idle, then at most one
		// per interval: twice that, and a few, allow for a slow machine
		// letting the journal fall idle now and then.
		bound := int64(2*window/interval) + 4
		paced := busyWrites(interval)
		unpaced := busyWrites(0)
		t.Logf("%s: %d journal writes in %v paced at %v, %d unpaced", mode, paced, window, interval, unpaced)
		if paced > bound {
			t.Errorf("paced at %v: %d journal writes in %v, want at most %d", interval, paced, window, bound)
		}
		if unpaced <= bound {
			t.Errorf("unpaced: only %d journal writes in %v: the load did not keep the journal busy, and the paced count proves nothing", unpaced, window)
		}

		// Light load: every write carries one record, so none waits, even
		// at the longest interval (waiting would take 30 x 100 ms).
		e, ps := open(maxJournalCommitInterval)
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
