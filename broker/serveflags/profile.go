//go:build linux

package serveflags

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath"
	"github.com/urfave/cli/v2"
)

// Profiling on the admin listener:
//
//   - /debug/pprof/ is Go's net/http/pprof, on by default (--pprof=false
//     turns it off). The admin listener binds loopback by default, and
//     these handlers answer loopback clients only unless --pprof-remote:
//     profiles expose internals and a CPU profile costs CPU.
//   - /debug/ringlog/profile?seconds=S[&mutex_fraction=N][&block_rate=D]
//     is a profiling window: a CPU profile of exactly S seconds (a float,
//     unlike pprof's whole seconds) plus mutex, block (both as deltas over
//     the window), heap and goroutine profiles and the process's CPU time
//     and counters over the window, returned as one zip. `ringlog loadgen
//     --profile-broker` calls it for the measured window of a run.
//
// Mutex and block profiling cost CPU on every contended lock and every
// blocking event, so they are off by default. A window turns them on for
// its duration when asked (mutex_fraction, block_rate) and restores the
// broker's setting afterwards; --mutex-profile-fraction and
// --block-profile-rate turn them on for the broker's whole life instead.

// profilingFlags are serve's flags of the profiling endpoints.
func profilingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "pprof", Value: true, Usage: "serve /debug/pprof/ and profiling windows (/debug/ringlog/profile) on the admin listener", EnvVars: EnvVars("pprof")},
		&cli.BoolFlag{Name: "pprof-remote", Usage: "answer profiling requests from non-loopback clients too (default: loopback only)", EnvVars: EnvVars("pprof-remote")},
		&cli.IntFlag{Name: "mutex-profile-fraction", Usage: "always-on mutex profiling: sample 1/N of contention events (0: off; profiling windows enable it for their duration)", EnvVars: EnvVars("mutex-profile-fraction")},
		&cli.DurationFlag{Name: "block-profile-rate", Usage: "always-on block profiling: sample one blocking event per this much time blocked (0: off; profiling windows enable it for their duration)", EnvVars: EnvVars("block-profile-rate")},
	}
}

// setupProfiling applies the always-on profile rates (when setRates: they
// are the process's) and, with --pprof, registers the profiling endpoints
// on mux (broker.Config.AdminHandlers).
func setupProfiling(c *cli.Context, mux *http.ServeMux, cfg broker.Config, b *broker.Broker, setRates bool) {
	log := cfg.Logger
	pw := &profileWindows{
		mutexFraction: c.Int("mutex-profile-fraction"),
		blockRate:     c.Duration("block-profile-rate"),
		nodeID:        cfg.NodeID,
		version:       cfg.Version,
		srv:           b,
		eng:           b.Engine(),
	}
	if setRates {
		runtime.SetMutexProfileFraction(pw.mutexFraction)
		runtime.SetBlockProfileRate(int(pw.blockRate.Nanoseconds()))
	}
	if !c.Bool("pprof") {
		log.Info("profiling endpoints off (--pprof=false)")
		return
	}
	guard := loopbackOnly
	if c.Bool("pprof-remote") {
		guard = func(h http.Handler) http.Handler { return h }
	}
	mux.Handle("/debug/pprof/", guard(http.HandlerFunc(httppprof.Index)))
	mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(httppprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(httppprof.Profile)))
	mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(httppprof.Symbol)))
	mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(httppprof.Trace)))
	mux.Handle("/debug/ringlog/profile", guard(pw))
	log.Info("profiling endpoints on the admin listener", "pprof", "/debug/pprof/", "window", "/debug/ringlog/profile",
		"remote_clients", c.Bool("pprof-remote"), "mutex_profile_fraction", pw.mutexFraction, "block_profile_rate", pw.blockRate)
}

// loopbackOnly refuses clients that are not on this host.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "loopback clients only (profiling: start the broker with --pprof-remote)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// maxProfileWindow bounds one window: a forgotten request must not keep
// the CPU profiler (and mutex/block profiling) on for hours.
const maxProfileWindow = time.Hour

// profileWindows serves /debug/ringlog/profile, one window at a time (the
// CPU profiler is process-wide).
type profileWindows struct {
	mu            sync.Mutex
	mutexFraction int           // the broker's own setting, restored after a window
	blockRate     time.Duration // likewise
	nodeID        int32
	version       string
	srv           statsSource // nil in tests that serve no broker
	eng           *engine.Engine
}

// statsSource is the Kafka server's counters (*broker.Broker).
type statsSource interface{ Stats() netpath.Stats }

// windowDoc is window.json in the zip a profiling window returns.
type windowDoc struct {
	NodeID    int32     `json:"node_id"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	IOPath    string    `json:"io_path"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Seconds   float64   `json:"seconds"`
	NumCPU    int       `json:"num_cpu"`
	MaxProcs  int       `json:"gomaxprocs"`
	CPUUserS  float64   `json:"cpu_user_seconds"`
	CPUSysS   float64   `json:"cpu_system_seconds"`
	MutexFrac int       `json:"mutex_profile_fraction"`
	BlockRate int64     `json:"block_profile_rate_ns"`
	// Counters are the broker's counter deltas over the window.
	Counters map[string]uint64 `json:"counters"`
	// Notes says what a profile lacks and why.
	Notes []string `json:"notes,omitempty"`
}

func (pw *profileWindows) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secs, err := strconv.ParseFloat(r.FormValue("seconds"), 64)
	if err != nil || secs <= 0 || time.Duration(secs*float64(time.Second)) > maxProfileWindow {
		http.Error(w, fmt.Sprintf("seconds=%q: want a number in (0, %v]", r.FormValue("seconds"), maxProfileWindow.Seconds()), http.StatusBadRequest)
		return
	}
	mutexFrac, err1 := optionalInt(r.FormValue("mutex_fraction"))
	blockRate, err2 := optionalDuration(r.FormValue("block_rate"))
	if err1 != nil || err2 != nil || mutexFrac < 0 || blockRate < 0 {
		http.Error(w, "mutex_fraction: a count >= 0; block_rate: a duration >= 0 (e.g. 100us)", http.StatusBadRequest)
		return
	}
	if !pw.mu.TryLock() {
		http.Error(w, "another profiling window is running", http.StatusConflict)
		return
	}
	defer pw.mu.Unlock()
	win, files, err := pw.capture(r, time.Duration(secs*float64(time.Second)), mutexFrac, blockRate)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	if r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	meta, _ := json.MarshalIndent(win, "", "  ")
	files = append(files, namedFile{"window.json", meta})
	for _, f := range files {
		fw, err := zw.Create(f.name)
		if err == nil {
			_, err = fw.Write(f.data)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if err := zw.Close(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Write(buf.Bytes())
}

type namedFile struct {
	name string
	data []byte
}

func (pw *profileWindows) capture(r *http.Request, d time.Duration, mutexFrac int, blockRate time.Duration) (windowDoc, []namedFile, error) {
	win := windowDoc{NodeID: pw.nodeID, PID: os.Getpid(), Version: pw.version,
		NumCPU: runtime.NumCPU(), MaxProcs: runtime.GOMAXPROCS(0), MutexFrac: pw.mutexFraction, BlockRate: pw.blockRate.Nanoseconds()}
	if pw.eng != nil {
		win.IOPath = pw.eng.IOPath()
	}
	if mutexFrac > 0 {
		runtime.SetMutexProfileFraction(mutexFrac)
		win.MutexFrac = mutexFrac
		defer runtime.SetMutexProfileFraction(pw.mutexFraction)
	}
	if blockRate > 0 {
		runtime.SetBlockProfileRate(int(blockRate.Nanoseconds()))
		win.BlockRate = blockRate.Nanoseconds()
		defer runtime.SetBlockProfileRate(int(pw.blockRate.Nanoseconds()))
	}
	mutex0, block0 := lookupProfile("mutex"), lookupProfile("block")
	counters0 := pw.counters()
	ru0 := rusage()

	var cpu bytes.Buffer
	if err := pprof.StartCPUProfile(&cpu); err != nil {
		return win, nil, fmt.Errorf("starting the CPU profile: %w (is /debug/pprof/profile running?)", err)
	}
	win.Start = time.Now()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	pprof.StopCPUProfile()
	win.End = time.Now()
	ru1 := rusage()
	counters1 := pw.counters()
	mutex1, block1 := lookupProfile("mutex"), lookupProfile("block")

	win.Seconds = win.End.Sub(win.Start).Seconds()
	win.CPUUserS = ru1.user - ru0.user
	win.CPUSysS = ru1.sys - ru0.sys
	win.Counters = map[string]uint64{}
	for k, v := range counters1 {
		win.Counters[k] = v - counters0[k]
	}
	files := []namedFile{{"cpu.pprof", cpu.Bytes()}}
	for _, p := range []struct {
		name       string
		start, end []byte
		rate       bool
	}{{"mutex", mutex0, mutex1, win.MutexFrac > 0}, {"block", block0, block1, win.BlockRate > 0}} {
		delta, err := profileDelta(p.start, p.end)
		if err != nil {
			win.Notes = append(win.Notes, fmt.Sprintf("%s profile: %v", p.name, err))
			continue
		}
		if !p.rate {
			win.Notes = append(win.Notes, fmt.Sprintf("%s profiling was off during the window (ask with %s)", p.name, map[string]string{"mutex": "mutex_fraction", "block": "block_rate"}[p.name]))
		}
		files = append(files, namedFile{p.name + ".pprof", delta})
	}
	// The heap profile describes the last completed GC; one now makes it
	// current (after the window, so it costs the window nothing).
	runtime.GC()
	files = append(files, namedFile{"heap.pprof", lookupProfile("heap")}, namedFile{"goroutine.pprof", lookupProfile("goroutine")})
	return win, files, nil
}

// counters are the broker's cumulative counters that window.json reports
// as deltas.
func (pw *profileWindows) counters() map[string]uint64 {
	out := map[string]uint64{}
	if pw.srv != nil {
		st := pw.srv.Stats()
		out["requests"] = st.Requests
		out["bytes_in"] = st.BytesIn
		out["bytes_out"] = st.BytesOut
		out["fetch_zero_copy_bytes"] = st.ZeroCopyBytes
		out["fetch_copied_bytes"] = st.CopiedBytes
	}
	if pw.eng != nil {
		st := pw.eng.Stats()
		out["appends"] = uint64(st.Appends)
		out["appended_bytes"] = uint64(st.AppendedBytes)
		out["fsyncs"] = uint64(st.Fdatasyncs)
		out["ring_enters"] = uint64(st.RingEnters)
		out["ring_submissions"] = uint64(st.RingSQEs)
	}
	return out
}

func lookupProfile(name string) []byte {
	var buf bytes.Buffer
	if p := pprof.Lookup(name); p != nil {
		p.WriteTo(&buf, 0)
	}
	return buf.Bytes()
}

// profileDelta is end minus start: mutex and block profiles are
// cumulative since the process started, and the window wants only its own
// events.
func profileDelta(start, end []byte) ([]byte, error) {
	p1, err := profile.ParseData(end)
	if err != nil {
		return nil, err
	}
	if p0, err := profile.ParseData(start); err == nil && len(p0.Sample) > 0 {
		p0.Scale(-1)
		if p1, err = profile.Merge([]*profile.Profile{p1, p0}); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if err := p1.Write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type cpuTimes struct{ user, sys float64 }

func rusage() cpuTimes {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuTimes{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return cpuTimes{tv(ru.Utime), tv(ru.Stime)}
}

func optionalInt(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.Atoi(s)
}

func optionalDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}
