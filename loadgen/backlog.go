package loadgen

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/ringlog/ringlog/results"
)

// backlogPoll is how often the backlog watch reads the counters: fine
// enough that the fill overshoots by little and the drain time is
// measured to a few tens of milliseconds.
const backlogPoll = 20 * time.Millisecond

// drainRatio is BacklogDrainRatio with its default, OMB's 1.0.
func (c Config) drainRatio() float64 {
	if c.BacklogDrainRatio == 0 {
		return 1
	}
	return c.BacklogDrainRatio
}

// backlogWatch runs a backlog-drain workload as OMB does: the consumers
// stay paused until the unread messages (summed over the groups) reach
// the target, then start while the producers continue, and the drain ends
// when the unread messages are back to (1 - drainRatio) of the target, or
// to a tenth of a second of production (at most a tenth of the target),
// whichever is larger: with producers running the lag never reaches zero,
// only the messages in flight between a produce and its fetch.
type backlogWatch struct {
	st     *runState
	start  func() // resumes the consumers, once
	target int64  // messages
	empty  int64  // caught up at or below this many unread
	res    results.BacklogDrain
	warn   string
	done   chan struct{}
	// out gets a line when the drain starts and ends (nil: quiet).
	out io.Writer
}

func newBacklogWatch(st *runState, start func(), out io.Writer) *backlogWatch {
	cfg := st.cfg
	target := (cfg.BacklogBytes + int64(cfg.MessageSize) - 1) / int64(cfg.MessageSize)
	groups := float64(cfg.consumerGroups())
	slack := math.Min(groups*cfg.Rate/10, float64(target)/10)
	empty := int64(math.Max((1-cfg.drainRatio())*float64(target), slack))
	return &backlogWatch{st: st, start: start, target: target, empty: empty,
		res: results.BacklogDrain{TargetBytes: cfg.BacklogBytes, CaughtUpMessages: empty}, done: make(chan struct{}), out: out}
}

// unread is what the consumers have yet to read: every group reads every
// acknowledged message.
func (b *backlogWatch) unread() int64 {
	return int64(b.st.cfg.consumerGroups())*b.st.c.acked.Load() - b.st.c.consumed.Load()
}

// run fills and drains until the drain is over or producersDone closes;
// the consumers have been resumed when it returns.
func (b *backlogWatch) run(producersDone <-chan struct{}) {
	defer close(b.done)
	tick := time.NewTicker(backlogPoll)
	defer tick.Stop()
	size := int64(b.st.cfg.MessageSize)
	var drainStart time.Time
	var consumed0 int64
	for {
		select {
		case <-producersDone:
			if drainStart.IsZero() {
				n := b.unread()
				b.warn = fmt.Sprintf("backlog: the producers stopped at %d of the %d bytes asked for; the consumers were resumed then and no drain was measured (lengthen --duration or raise --rate)", n*size, b.target*size)
				b.res.BacklogMessages, b.res.BacklogBytes = n, n*size
				b.start()
			} else {
				b.warn = fmt.Sprintf("backlog: not drained while the producers ran (%d messages still unread after %.1f s); the consumers could not catch up, or the run was too short", b.unread(), time.Since(drainStart).Seconds())
				b.res.DrainSeconds = time.Since(drainStart).Seconds()
				b.res.DrainRate = float64(b.st.c.consumed.Load()-consumed0) / b.res.DrainSeconds
			}
			return
		case now := <-tick.C:
			n := b.unread()
			if drainStart.IsZero() {
				if n < b.target {
					continue
				}
				b.res.BacklogMessages, b.res.BacklogBytes = n, n*size
				b.res.FillSeconds = float64(b.st.now()) / 1e9
				consumed0, drainStart = b.st.c.consumed.Load(), now
				b.start()
				b.say("backlog: %.1f MB (%d messages) unread at %.1fs; consumers resumed", float64(n*size)/1e6, n, b.res.FillSeconds)
				continue
			}
			if n <= b.empty {
				b.res.Drained = true
				b.res.DrainSeconds = now.Sub(drainStart).Seconds()
				b.res.DrainRate = float64(b.st.c.consumed.Load()-consumed0) / b.res.DrainSeconds
				b.say("backlog: drained in %.2f s at %.0f msg/s", b.res.DrainSeconds, b.res.DrainRate)
				return
			}
		}
	}
}

func (b *backlogWatch) say(format string, args ...any) {
	if b.out != nil {
		fmt.Fprintf(b.out, format+"\n", args...)
	}
}
