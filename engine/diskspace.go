package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Free-space threshold (docs/disk-full.md).
//
// Segments are the only thing that grows without bound; everything else
// the broker writes (the controller's raft log and snapshots, checkpoints,
// producer snapshots, indexes written at roll, directory entries,
// __consumer_offsets and __transaction_state records) is small. So instead
// of a ballast file the engine keeps a reserve: once the free space of the
// data directory's file system drops below the threshold, client appends
// (Partition.Append) are refused with ErrDiskFull while every other write
// goes on drawing from the reserve. A ballast file would reserve the same
// space but only help after someone deletes it by hand; the threshold
// leaves the reserve usable by the writes that need it without an
// operator.
//
// The threshold is max(MinFreeBytes, MinFreePercent of the file system),
// both conditions must hold. Appends resume by themselves once the free
// space is back above the threshold plus a margin of an eighth of it
// (hysteresis: a produce that frees nothing must not flip the state on
// every sample).
//
// The monitor samples statfs every DiskCheckInterval and after every
// deletion (DeleteTopic, retention). Between samples it subtracts the
// bytes appended since the last sample from the sampled free space, so a
// burst cannot run past the threshold between two samples; crossing the
// threshold by that estimate samples again before refusing.

// ErrDiskFull: the data directory's free space is below the threshold;
// client appends are refused until it is back above it. The message reads
// "disk space below threshold: N bytes free, need M".
var ErrDiskFull = errors.New("disk space below threshold")

// DiskStatus describes the free space of the data directory's file system
// and the produce threshold (/healthz, /metrics).
type DiskStatus struct {
	Path         string `json:"path"`
	FreeBytes    int64  `json:"free_bytes"`  // available to the broker (statfs f_bavail)
	TotalBytes   int64  `json:"total_bytes"` // size of the file system
	MinFreeBytes int64  `json:"min_free_bytes"`
	// ResumeFreeBytes is where a degraded broker accepts appends again.
	ResumeFreeBytes int64 `json:"resume_free_bytes"`
	// Degraded: free space fell below MinFreeBytes; client appends are
	// refused with KAFKA_STORAGE_ERROR.
	Degraded bool `json:"degraded"`
	// RefusedAppends counts appends refused for lack of space.
	RefusedAppends int64     `json:"refused_appends"`
	SampledAt      time.Time `json:"sampled_at"`
	Error          string    `json:"error,omitempty"` // last statfs failure
}

// StatFSFunc reports the bytes available to unprivileged writers and the
// total size of the file system holding dir.
type StatFSFunc func(dir string) (free, total int64, err error)

// OSStatFS is statfs(2).
func OSStatFS(dir string) (int64, int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, nil
}

// diskMonitor holds the threshold state. admit and note are on the append
// path: atomics only, unless the estimate crosses the threshold.
type diskMonitor struct {
	dir      string
	statfs   StatFSFunc
	minBytes int64
	minPct   float64
	log      *slog.Logger

	degraded atomic.Bool
	// free is the last sample minus the bytes appended since (since).
	free    atomic.Int64
	since   atomic.Int64
	need    atomic.Int64
	refused atomic.Int64

	mu      sync.Mutex // serializes samples
	total   int64
	at      time.Time
	lastErr error
}

// newDiskMonitor samples once. osFS says the engine writes to the OS file
// system; other file systems (in memory) have no statfs unless cfg.StatFS
// provides one, and get no threshold.
func newDiskMonitor(cfg Config, log *slog.Logger, osFS bool) *diskMonitor {
	m := &diskMonitor{dir: cfg.Dir, statfs: cfg.StatFS, minBytes: cfg.MinFreeBytes, minPct: cfg.MinFreePercent, log: log}
	if m.statfs == nil && !osFS {
		m.minBytes, m.minPct = 0, 0
		m.statfs = func(string) (int64, int64, error) { return 0, 0, nil }
	}
	if m.statfs == nil {
		m.statfs = OSStatFS
	}
	m.free.Store(1<<62 - 1) // until the first sample: unknown, admit
	m.sample()
	return m
}

func (m *diskMonitor) enabled() bool { return m.minBytes > 0 || m.minPct > 0 }

// resume is the free space at which a degraded broker accepts appends.
func resumeAt(need int64) int64 { return need + need/8 }

// admit says whether a client append of n bytes may go ahead.
func (m *diskMonitor) admit(n int64) error {
	if !m.enabled() {
		return nil
	}
	if !m.degraded.Load() && m.free.Load()-m.since.Load()-n >= m.need.Load() {
		return nil
	}
	if !m.degraded.Load() {
		// The estimate crossed the threshold: confirm with statfs.
		m.sample()
	}
	return m.refusing()
}

// note counts n bytes written since the last sample.
func (m *diskMonitor) note(n int64) { m.since.Add(n) }

// refusing is admit's verdict without a new estimate or sample: whether
// client appends are refused now (Partition.append asks again under the
// partition lock).
func (m *diskMonitor) refusing() error {
	if !m.enabled() || !m.degraded.Load() {
		return nil
	}
	m.refused.Add(1)
	return fmt.Errorf("%w: %d bytes free, need %d", ErrDiskFull, max(m.free.Load()-m.since.Load(), 0), m.need.Load())
}

// noSpace is the write path's report of an ENOSPC: degrade now, whatever
// the last sample said (f_bavail can overstate what a write may use). A
// nil monitor (write-path tests without an Engine) ignores it.
func (m *diskMonitor) noSpace() {
	if m != nil && m.enabled() && !m.degraded.Swap(true) {
		m.log.Warn("disk full: a write failed with ENOSPC; refusing produce until free space is back above the threshold",
			"path", m.dir, "resume_free_bytes", resumeAt(m.need.Load()))
	}
}

// sample reads statfs and moves the state, logging transitions.
func (m *diskMonitor) sample() DiskStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.since.Load()
	free, total, err := m.statfs(m.dir)
	m.at = time.Now()
	if err != nil {
		if m.lastErr == nil || m.lastErr.Error() != err.Error() {
			m.log.Warn("statfs of the data directory failed; keeping the last free-space sample", "path", m.dir, "err", err)
		}
		m.lastErr = err
		return m.statusLocked()
	}
	m.lastErr = nil
	m.total = total
	need := max(m.minBytes, int64(float64(total)*m.minPct/100))
	m.need.Store(need)
	m.free.Store(free)
	m.since.Add(-before)
	if !m.enabled() {
		return m.statusLocked()
	}
	switch {
	case !m.degraded.Load() && free < need:
		m.degraded.Store(true)
		m.log.Warn("disk space below threshold; refusing produce (fetch, deletes, retention and metadata keep working)",
			"path", m.dir, "free_bytes", free, "min_free_bytes", need, "total_bytes", total)
	case m.degraded.Load() && free >= resumeAt(need):
		m.degraded.Store(false)
		m.log.Info("disk space back above threshold; accepting produce", "path", m.dir, "free_bytes", free, "min_free_bytes", need)
	}
	return m.statusLocked()
}

// Lock must be held.
func (m *diskMonitor) statusLocked() DiskStatus {
	need := m.need.Load()
	st := DiskStatus{
		Path: m.dir, FreeBytes: max(m.free.Load()-m.since.Load(), 0), TotalBytes: m.total,
		MinFreeBytes: need, ResumeFreeBytes: resumeAt(need), Degraded: m.degraded.Load(),
		RefusedAppends: m.refused.Load(), SampledAt: m.at,
	}
	if m.lastErr != nil {
		st.Error = m.lastErr.Error()
	}
	return st
}

// DiskStatus returns the free-space state as last sampled (adjusted for
// bytes appended since).
func (e *Engine) DiskStatus() DiskStatus {
	e.disk.mu.Lock()
	defer e.disk.mu.Unlock()
	return e.disk.statusLocked()
}

// CheckDisk samples the free space now and returns the new state.
func (e *Engine) CheckDisk() DiskStatus { return e.disk.sample() }

// DiskFull returns an ErrDiskFull error while the broker refuses appends
// for lack of space, else nil. Handlers that would make the broker create
// files (new topics and partitions) ask it first.
func (e *Engine) DiskFull() error {
	if !e.disk.degraded.Load() {
		return nil
	}
	st := e.DiskStatus()
	return fmt.Errorf("%w: %d bytes free, need %d", ErrDiskFull, st.FreeBytes, st.MinFreeBytes)
}

// isNoSpace reports an ENOSPC (or EDQUOT) anywhere in err's chain.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
