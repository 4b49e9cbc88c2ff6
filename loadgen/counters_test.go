package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/procstat"
	"github.com/ringlog/ringlog/results"
)

// writeProc writes a fake /proc/<pid> for pid 42 under root: stat with
// cpuTicks of utime (stime 0) and one task directory per thread.
func writeProc(t *testing.T, root string, cpuTicks int, threads []procstat.Thread) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, "42")); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("42/stat", "42 (broker) S 1 42 42 0 -1 0 0 0 0 0 "+itoa(cpuTicks)+" 0 0 0 20 0 1 0 1 1 1\n")
	for _, th := range threads {
		dir := "42/task/" + itoa(th.TID) + "/"
		write(dir+"comm", th.Name+"\n")
		write(dir+"status", "Name:\t"+th.Name+"\nvoluntary_ctxt_switches:\t"+itoa(int(th.Voluntary))+"\nnonvoluntary_ctxt_switches:\t"+itoa(int(th.Involuntary))+"\n")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPidSourceWindow: a process read from a fake /proc at the window's
// start and end: a thread that ran on counts its difference, one that
// appeared counts from 0, one that exited is lost (and counted as
// exited), a TID reused by another thread counts as new, and the
// switches group by name with io_uring workers together.
func TestPidSourceWindow(t *testing.T) {
	root := t.TempDir()
	src := pidSource{proc: procstat.FS{Root: root}, pid: 42}
	w := &counterWindow{sources: []counterSource{src}, sameHost: true}
	writeProc(t, root, 100, []procstat.Thread{
		{TID: 42, Name: "broker", Voluntary: 1000, Involuntary: 10},
		{TID: 43, Name: "broker", Voluntary: 500, Involuntary: 5},
		{TID: 44, Name: "broker", Voluntary: 70, Involuntary: 7}, // exits
		{TID: 45, Name: "iou-wrk-42", Voluntary: 900, Involuntary: 0},
		{TID: 46, Name: "iou-wrk-42", Voluntary: 50, Involuntary: 1}, // exits; its TID is reused below
	})
	start, _, err := w.sample(context.Background())
	if err != nil || w.srcErr != nil {
		t.Fatal(err, w.srcErr)
	}
	writeProc(t, root, 350, []procstat.Thread{
		{TID: 42, Name: "broker", Voluntary: 1600, Involuntary: 30},
		{TID: 43, Name: "broker", Voluntary: 800, Involuntary: 5},
		{TID: 45, Name: "iou-wrk-42", Voluntary: 4900, Involuntary: 2},
		{TID: 46, Name: "broker", Voluntary: 20, Involuntary: 0}, // a new thread on a reused TID
		{TID: 47, Name: "iou-wrk-42", Voluntary: 300, Involuntary: 1},
	})
	end, _, err := w.sample(context.Background())
	if err != nil || w.srcErr != nil {
		t.Fatal(err, w.srcErr)
	}
	p := processDelta(start[0], end[0], src.admin())
	if p.PID != 42 || p.Name != "broker" || p.Admin != "" || !near(p.Seconds, 2.5) {
		t.Fatalf("process %+v", p)
	}
	sw := p.CtxSwitches
	// broker: 600+20 + 300+0 + 20+0 (new); iou-wrk-*: 4000+2 + 300+1 (new).
	want := &results.CtxSwitches{Voluntary: 5220, Involuntary: 23, ThreadsStarted: 2, ThreadsExited: 1,
		ByThread: []results.ThreadSwitches{{Name: "iou-wrk-*", Threads: 2, Voluntary: 4300, Involuntary: 3}, {Name: "broker", Threads: 3, Voluntary: 920, Involuntary: 20}}}
	if !reflect.DeepEqual(sw, want) {
		t.Fatalf("switches\n%+v\nwant\n%+v", sw, want)
	}
	// The process gone at the end: the window has no broker numbers, and
	// says why.
	os.RemoveAll(filepath.Join(root, "42"))
	w.end, w.gen1, w.err = w.sample(context.Background())
	w.start, w.done = start, make(chan struct{})
	close(w.done)
	b, g, warns := w.result(1000, 1e6)
	if b != nil || g == nil || len(warns) != 1 || !strings.Contains(warns[0], "--broker-pid 42: no such process on this machine") {
		t.Fatalf("vanished process: %+v %+v %q", b, g, warns)
	}
}

// TestAdminSourceExitedThreads: through a broker's admin endpoint the
// totals are getrusage's, so the switches of threads that exited during
// the window are counted, as "(exited threads)"; the endpoint's boot id
// tells whether the broker shares this machine.
func TestAdminSourceExitedThreads(t *testing.T) {
	local := procstat.FS{}.BootID()
	if local == "" {
		t.Skip("no boot id (not Linux)")
	}
	var n atomic.Int32
	snaps := []procstat.Snapshot{
		{PID: 7, Name: "ringlog", CPUSeconds: 10, Voluntary: 5000, Involuntary: 100, ExitedIncluded: true, BootID: local,
			Threads: []procstat.Thread{{TID: 7, Name: "ringlog", Voluntary: 3000, Involuntary: 50}, {TID: 9, Name: "iou-wrk-7", Voluntary: 1000, Involuntary: 10}}},
		{PID: 7, Name: "ringlog", CPUSeconds: 10.5, Voluntary: 9000, Involuntary: 150, ExitedIncluded: true, BootID: local,
			Threads: []procstat.Thread{{TID: 7, Name: "ringlog", Voluntary: 5000, Involuntary: 80}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != procstat.CountersPath {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(snaps[min(int(n.Add(1))-1, len(snaps)-1)])
	}))
	defer srv.Close()
	cfg := Config{CounterAdmins: []string{strings.TrimPrefix(srv.URL, "http://")}}
	srcs, sameHost, err := counterSources(context.Background(), cfg)
	if err != nil || len(srcs) != 1 || !sameHost {
		t.Fatalf("sources %v same host %v: %v", srcs, sameHost, err)
	}
	n.Store(0) // the check read the first snapshot; the window reads both
	a, err1 := srcs[0].read(context.Background())
	b, err2 := srcs[0].read(context.Background())
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	p := processDelta(a, b, srcs[0].admin())
	want := &results.CtxSwitches{Voluntary: 4000, Involuntary: 50, ThreadsExited: 1, ExitedCounted: true,
		ByThread: []results.ThreadSwitches{{Name: "ringlog", Threads: 1, Voluntary: 2000, Involuntary: 30}, {Name: results.ExitedThreadsName, Threads: 1, Voluntary: 2000, Involuntary: 20}}}
	if !reflect.DeepEqual(p.CtxSwitches, want) || p.Admin != cfg.CounterAdmins[0] || !near(p.Seconds, 0.5) {
		t.Fatalf("delta %+v %+v\nwant %+v", p, p.CtxSwitches, want)
	}
	// Another machine's broker: no contention check.
	snaps[0].BootID = "another-machine"
	n.Store(0)
	if _, sameHost, err := counterSources(context.Background(), cfg); err != nil || sameHost {
		t.Fatalf("remote broker taken for local (%v)", err)
	}
	// Not a ringlog broker of this version: the run does not start.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	cfg.CounterAdmins = []string{other.URL}
	if _, _, err := counterSources(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("no counters endpoint: %v", err)
	}
	if _, _, err := counterSources(context.Background(), Config{BrokerPIDs: []int{1 << 30}}); err == nil ||
		!strings.Contains(err.Error(), "no such process") {
		t.Fatalf("missing pid: %v", err)
	}
}

// TestCounterWindowReadsGenerator: a window over this process measures
// the generator's CPU and the cores, and the process read by pid, over
// the window's time.
func TestCounterWindowReadsGenerator(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	srcs, sameHost, err := counterSources(context.Background(), Config{BrokerPIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	w := startCounterWindow(context.Background(), srcs, sameHost, time.Now(), 300*time.Millisecond)
	// Spin until the window is over, so both sides have CPU to count.
	for spinning := true; spinning; {
		select {
		case <-w.done:
			spinning = false
		default:
		}
	}
	b, g, warns := w.result(1000, 1e6)
	if len(warns) != 0 || b == nil || g == nil {
		t.Fatalf("%+v %+v %q", b, g, warns)
	}
	if g.Cores != runtime.NumCPU() || g.Processes != 1 || g.WindowS < 0.29 || g.Seconds < 0.1 || g.Voluntary+g.Involuntary < 0 {
		t.Fatalf("generator %+v", g)
	}
	if !b.SameHost || b.Processes != 1 || b.Brokers[0].PID != os.Getpid() || b.Seconds < 0.1 || b.CPUMicrosPerMsg < 100 ||
		b.CtxSwitches == nil || b.CtxSwitches.ExitedCounted {
		t.Fatalf("broker %+v", b)
	}
}
