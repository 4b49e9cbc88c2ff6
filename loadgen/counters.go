package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/ringlog/ringlog/internal/procstat"
	"github.com/ringlog/ringlog/results"
)

// What the measured window cost the brokers and the generator: CPU time
// and thread context switches, read at the window's start and end.
//
// Brokers are read where the harness knows them: by pid from /proc
// (ringlog bench's own brokers, loadgen --broker-pid: any broker process
// on this machine, ringlog or not), summing the switches of every thread
// (/proc/PID/task/TID/status), io_uring io-wq workers included; or by
// admin address (loadgen --broker-admin, ringlog brokers anywhere), whose
// /v1/process/counters answers getrusage totals plus its live threads.
// A thread that exists only at the window's end counts from 0; one that
// exited during the window takes its switches with it when read from
// /proc (getrusage keeps them: they show as "(exited threads)"). CPU time
// includes exited threads either way.
//
// The generator reads its own getrusage over the same window, and the
// machine's cores, so a report can tell when brokers and generator
// together saturated the machine they share.

// countersTimeout bounds one read of a broker's admin endpoint.
const countersTimeout = 5 * time.Second

// counterSource is one broker process a window reads.
type counterSource interface {
	read(ctx context.Context) (procstat.Snapshot, error)
	// admin is the admin address read, "" for a process read from /proc.
	admin() string
}

// pidSource reads a process on this machine from /proc.
type pidSource struct {
	proc procstat.FS
	pid  int
}

func (s pidSource) admin() string { return "" }

func (s pidSource) read(context.Context) (procstat.Snapshot, error) {
	snap, err := s.proc.Process(s.pid)
	if errors.Is(err, fs.ErrNotExist) {
		return snap, fmt.Errorf("--broker-pid %d: no such process on this machine", s.pid)
	}
	if err != nil {
		return snap, fmt.Errorf("--broker-pid %d: %w", s.pid, err)
	}
	return snap, nil
}

// adminSource reads a ringlog broker's /v1/process/counters.
type adminSource struct {
	addr string // as given
	url  string
	hc   *http.Client
}

func newAdminSource(addr string) (adminSource, error) {
	s := addr
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return adminSource{}, fmt.Errorf("--broker-admin %q: want host:port or http://host:port", addr)
	}
	return adminSource{addr: addr, url: u.Scheme + "://" + u.Host + procstat.CountersPath,
		hc: &http.Client{Timeout: countersTimeout}}, nil
}

func (s adminSource) admin() string { return s.addr }

func (s adminSource) read(ctx context.Context) (procstat.Snapshot, error) {
	var snap procstat.Snapshot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return snap, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return snap, fmt.Errorf("--broker-admin %s: %w", s.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return snap, fmt.Errorf("--broker-admin %s: %s: %s %s (a ringlog broker of this version serves it)",
			s.addr, procstat.CountersPath, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&snap); err != nil {
		return snap, fmt.Errorf("--broker-admin %s: %s: %w", s.addr, procstat.CountersPath, err)
	}
	return snap, nil
}

// counterSources are the brokers cfg names, each read once now so that a
// wrong pid or address fails the run before it starts; sameHost says
// they all run on this machine (by pid, or an admin endpoint reporting
// this kernel's boot id).
func counterSources(ctx context.Context, cfg Config) (srcs []counterSource, sameHost bool, err error) {
	for _, pid := range cfg.BrokerPIDs {
		srcs = append(srcs, pidSource{pid: pid})
	}
	for _, a := range cfg.CounterAdmins {
		s, err := newAdminSource(a)
		if err != nil {
			return nil, false, &UsageError{err}
		}
		srcs = append(srcs, s)
	}
	boot := procstat.FS{}.BootID()
	sameHost = len(srcs) > 0
	for _, s := range srcs {
		snap, err := s.read(ctx)
		if err != nil {
			return nil, false, err
		}
		if s.admin() != "" && (snap.BootID == "" || snap.BootID != boot) {
			sameHost = false
		}
	}
	return srcs, sameHost, nil
}

// counterWindow reads the generator's and the sources' counters at start
// and at start+d (or when ctx ends, for an interrupted run). done is
// closed when it has.
type counterWindow struct {
	sources    []counterSource
	sameHost   bool
	done       chan struct{}
	window     time.Duration
	gen0, gen1 procstat.Usage
	// machineBusy is the whole machine's busy cores over the window
	// (/proc/stat), 0 when it could not be read.
	machineBusy float64
	start, end  []procstat.Snapshot
	err         error // nothing measured: ctx ended before the window
	srcErr      error // a broker could not be read
}

func startCounterWindow(ctx context.Context, sources []counterSource, sameHost bool, start time.Time, d time.Duration) *counterWindow {
	w := &counterWindow{sources: sources, sameHost: sameHost, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		if !sleepUntil(ctx, start) {
			w.err = ctx.Err()
			return
		}
		m0, err0 := (procstat.FS{}).Machine()
		mt0 := time.Now()
		w.start, w.gen0, w.err = w.sample(ctx)
		if w.err != nil {
			return
		}
		t0 := time.Now()
		sleepUntil(ctx, start.Add(d)) // an interrupt ends the window early
		// The end is read even after an interrupt: a context that is not
		// cancelled, bounded by countersTimeout per read.
		w.end, w.gen1, w.err = w.sample(context.WithoutCancel(ctx))
		w.window = time.Since(t0)
		if m1, err1 := (procstat.FS{}).Machine(); err0 == nil && err1 == nil {
			w.machineBusy = procstat.BusyCores(m0, m1, time.Since(mt0).Seconds(), runtime.NumCPU())
		}
	}()
	return w
}

// sample reads the generator, then every source; a source that fails
// sets srcErr (the generator's numbers still count).
func (w *counterWindow) sample(ctx context.Context) ([]procstat.Snapshot, procstat.Usage, error) {
	u, err := procstat.Rusage()
	if err != nil {
		return nil, u, err
	}
	snaps := make([]procstat.Snapshot, len(w.sources))
	for i, s := range w.sources {
		if snaps[i], err = s.read(ctx); err != nil && w.srcErr == nil {
			w.srcErr = err
		}
	}
	return snaps, u, nil
}

// result waits for the window and returns the brokers' counters (nil
// without sources) and the generator's, with acked messages of bytes
// payload acknowledged in the window; warnings say what could not be
// measured.
func (w *counterWindow) result(acked, bytes int64) (*results.BrokerCPU, *results.GeneratorCPU, []string) {
	<-w.done
	if w.err != nil {
		if len(w.sources) == 0 {
			return nil, nil, nil
		}
		return nil, nil, []string{fmt.Sprintf("broker CPU not measured: %v", w.err)}
	}
	secs := w.window.Seconds()
	gen := &results.GeneratorCPU{WindowS: secs, Seconds: w.gen1.CPUSeconds() - w.gen0.CPUSeconds(),
		Voluntary: int64(w.gen1.Voluntary - w.gen0.Voluntary), Involuntary: int64(w.gen1.Involuntary - w.gen0.Involuntary),
		Cores: runtime.NumCPU(), Processes: 1, MachineBusyCores: w.machineBusy}
	if len(w.sources) == 0 {
		return nil, gen, nil
	}
	if w.srcErr != nil {
		return nil, gen, []string{fmt.Sprintf("broker CPU not measured: %v", w.srcErr)}
	}
	procs := make([]results.BrokerProcess, len(w.sources))
	for i, s := range w.sources {
		procs[i] = processDelta(w.start[i], w.end[i], s.admin())
	}
	return results.NewBrokerCPU(secs, procs, acked, bytes, w.sameHost), gen, nil
}

// processDelta is what one process did between two snapshots. Threads
// are matched by TID (and name: a TID the kernel reused for another
// thread counts as a new one); a new thread counts from 0, one that
// exited is lost unless the snapshots' totals include exited threads
// (getrusage), in which case the difference between the totals and the
// live threads is theirs.
func processDelta(a, b procstat.Snapshot, admin string) results.BrokerProcess {
	p := results.BrokerProcess{PID: b.PID, Admin: admin, Name: b.Name, Seconds: max(0, b.CPUSeconds-a.CPUSeconds)}
	sw := &results.CtxSwitches{ExitedCounted: a.ExitedIncluded && b.ExitedIncluded}
	before := make(map[int]procstat.Thread, len(a.Threads))
	for _, t := range a.Threads {
		before[t.TID] = t
	}
	groups := map[string]*results.ThreadSwitches{}
	var liveV, liveI int64
	for _, t := range b.Threads {
		prev, ok := before[t.TID]
		delete(before, t.TID)
		if !ok || prev.Name != t.Name || t.Voluntary < prev.Voluntary || t.Involuntary < prev.Involuntary {
			prev = procstat.Thread{}
			sw.ThreadsStarted++
		}
		dv, di := int64(t.Voluntary-prev.Voluntary), int64(t.Involuntary-prev.Involuntary)
		name := procstat.GroupName(t.Name)
		g := groups[name]
		if g == nil {
			g = &results.ThreadSwitches{Name: name}
			groups[name] = g
		}
		g.Threads++
		g.Voluntary += dv
		g.Involuntary += di
		liveV += dv
		liveI += di
	}
	sw.ThreadsExited = len(before)
	sw.Voluntary, sw.Involuntary = liveV, liveI
	if sw.ExitedCounted {
		// Never below the live threads' sum: the totals are read just
		// after the threads, so they differ by what ran in between.
		sw.Voluntary = max(liveV, int64(b.Voluntary)-int64(a.Voluntary))
		sw.Involuntary = max(liveI, int64(b.Involuntary)-int64(a.Involuntary))
		if ev, ei := sw.Voluntary-liveV, sw.Involuntary-liveI; ev+ei > 0 {
			groups[results.ExitedThreadsName] = &results.ThreadSwitches{Name: results.ExitedThreadsName,
				Threads: sw.ThreadsExited, Voluntary: ev, Involuntary: ei}
		}
	}
	for _, g := range groups {
		sw.ByThread = append(sw.ByThread, *g)
	}
	results.SortThreads(sw.ByThread)
	p.CtxSwitches = sw
	return p
}
