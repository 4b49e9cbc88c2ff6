// Package ratelog logs a failure that repeats (a full disk, a checkpoint
// that cannot be written, a reconcile that keeps failing) once per
// interval instead of on every attempt, and logs the recovery.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Failure tracks one recurring operation. The zero value is not usable:
// build it with New. Safe for concurrent use.
type Failure struct {
	log   *slog.Logger
	level slog.Level
	what  string
	every time.Duration

	mu     sync.Mutex
	last   string
	at     time.Time
	repeat int
}

// New returns a Failure that logs what at level, a repeated identical
// error at most once per every.
func New(log *slog.Logger, level slog.Level, what string, every time.Duration) *Failure {
	return &Failure{log: log, level: level, what: what, every: every}
}

// Report records one attempt's outcome: a new or changed error is logged
// at once, the same error again only once every interval (with how often
// it repeated meanwhile), and the first success after failures at Info.
func (f *Failure) Report(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		if f.last != "" {
			f.log.Info(f.what+" succeeded again", "failures", f.repeat+1)
		}
		f.last, f.repeat = "", 0
		return
	}
	msg := err.Error()
	if msg != f.last || time.Since(f.at) >= f.every {
		f.log.Log(context.Background(), f.level, f.what, "err", err, "repeats", f.repeat)
		f.last, f.at, f.repeat = msg, time.Now(), 0
		return
	}
	f.repeat++
}
