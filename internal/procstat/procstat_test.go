package procstat

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeProc writes a /proc tree under a temp dir: files maps a path
// relative to the root to its content; a path ending in "/" is an empty
// directory.
func fakeProc(t *testing.T, files map[string]string) FS {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return FS{Root: root}
}

func status(vol, invol string) string {
	return "Name:\tx\nState:\tS (sleeping)\nThreads:\t3\nvoluntary_ctxt_switches:\t" + vol + "\nnonvoluntary_ctxt_switches:\t" + invol + "\n"
}

// A stat line whose command name holds spaces and parentheses; utime 250
// and stime 130 ticks are fields 14 and 15.
const stat42 = "42 (my (odd) broker) S 1 42 42 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 3 0 100 1000000 500 18446744073709551615\n"

func TestProcessSumsLiveThreads(t *testing.T) {
	p := fakeProc(t, map[string]string{
		"42/stat":                   stat42,
		"42/task/42/comm":           "ringlog\n",
		"42/task/42/status":         status("100", "7"),
		"42/task/43/comm":           "ringlog\n",
		"42/task/43/status":         status("20", "3"),
		"42/task/1044/comm":         "iou-wrk-42\n",
		"42/task/1044/status":       status("5000", "1"),
		"42/task/50/":               "", // exited between the listing and the read
		"42/task/not-a-tid/":        "",
		"sys/kernel/random/boot_id": "b00t-1\n",
	})
	s, err := p.Process(42)
	if err != nil {
		t.Fatal(err)
	}
	want := []Thread{{42, "ringlog", 100, 7}, {43, "ringlog", 20, 3}, {1044, "iou-wrk-42", 5000, 1}}
	if !reflect.DeepEqual(s.Threads, want) {
		t.Fatalf("threads %+v, want %+v", s.Threads, want)
	}
	if s.Name != "my (odd) broker" || s.CPUSeconds != 3.8 || s.Voluntary != 5120 || s.Involuntary != 11 ||
		s.ExitedIncluded || s.BootID != "b00t-1" || s.PID != 42 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestProcessErrors(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no process":      {},
		"short stat":      {"42/stat": "42 (x) S 1 2 3\n"},
		"bad utime":       {"42/stat": strings.Replace(stat42, " 250 ", " x ", 1)},
		"no name":         {"42/stat": "42 x S\n"},
		"no threads":      {"42/stat": stat42, "42/task/": ""},
		"missing counter": {"42/stat": stat42, "42/task/42/comm": "a\n", "42/task/42/status": "Name:\ta\nvoluntary_ctxt_switches:\t1\n"},
		"bad counter":     {"42/stat": stat42, "42/task/42/comm": "a\n", "42/task/42/status": status("1", "lots")},
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := fakeProc(t, files).Process(42); err == nil {
				t.Fatalf("no error: %+v", s)
			}
		})
	}
}

func TestGroupName(t *testing.T) {
	for in, want := range map[string]string{
		"iou-wrk-1234":    "iou-wrk-*",
		"ringlog":         "ringlog",
		"GC Thread#3":     "GC Thread#*",
		"C2 CompilerThre": "C2 CompilerThre",
		"12345":           "12345",
		"":                "",
	} {
		if got := GroupName(in); got != want {
			t.Errorf("GroupName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSelfAgainstProc: on Linux, this process read through the real /proc
// and through getrusage agree: getrusage, read after the threads, counts
// at least what the live threads have.
func TestSelfAgainstProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no /proc")
	}
	// /proc counts CPU in 10 ms ticks: a process that started a moment
	// ago may show none yet. Spin until it shows some.
	for start := time.Now(); time.Since(start) < 10*time.Second; {
		if p, err := (FS{}).Process(os.Getpid()); err == nil && p.CPUSeconds > 0 {
			break
		}
		for range 1_000_000 {
		}
	}
	s, err := Self(FS{})
	if err != nil {
		t.Fatal(err)
	}
	var vol, invol uint64
	for _, th := range s.Threads {
		vol += th.Voluntary
		invol += th.Involuntary
	}
	if len(s.Threads) == 0 || !s.ExitedIncluded || s.PID != os.Getpid() || s.Cores < 1 || s.BootID == "" || s.CPUSeconds <= 0 {
		t.Fatalf("self %+v", s)
	}
	if s.Voluntary+s.Involuntary == 0 || s.Voluntary < vol || s.Involuntary < invol {
		t.Fatalf("getrusage %d/%d below the live threads' %d/%d", s.Voluntary, s.Involuntary, vol, invol)
	}
	p, err := FS{}.Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.ExitedIncluded || len(p.Threads) == 0 || p.BootID != s.BootID || p.CPUSeconds <= 0 {
		t.Fatalf("process %+v", p)
	}
}

// TestCPUSecondsFollowsRusage: the /proc reading follows real CPU use: over a
// stretch of spinning it grows by what getrusage says this process used
// (both are the kernel's thread-group accounting; /proc in 10 ms ticks).
func TestCPUSecondsFollowsRusage(t *testing.T) {
	rusage := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	p0, err := (FS{}).CPUSeconds(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	r0 := rusage()
	// Spin until this process has used 300 ms of CPU (the machine may be
	// busy, so wall time says little).
	for end := time.Now().Add(10 * time.Second); rusage()-r0 < 0.3 && time.Now().Before(end); {
	}
	p1, err := (FS{}).CPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	r1 := rusage()
	if dp, dr := p1-p0, r1-r0; dr < 0.3 || dp < dr-0.05 || dp > dr+0.05 {
		t.Fatalf("/proc grew by %.3f CPU-s while getrusage grew by %.3f", dp, dr)
	}
	if _, err := (FS{}).CPUSeconds(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

// TestMachine reads /proc/stat's cpu line: idle and iowait are the time
// nothing ran; busy cores are the capacity less that, steal counted busy.
func TestMachine(t *testing.T) {
	a := fakeProc(t, map[string]string{"stat": "cpu  100 10 50 800 20 5 15 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"})
	b := fakeProc(t, map[string]string{"stat": "cpu  300 10 150 900 30 5 35 30 70 0\n"})
	ma, err := a.Machine()
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.Machine()
	if err != nil {
		t.Fatal(err)
	}
	if ma.Idle != 820 || mb.Idle != 930 {
		t.Fatalf("idle %d and %d, want 820 and 930 (steal not idle)", ma.Idle, mb.Idle)
	}
	// 110 ticks (1.1 s) of nothing over 2 s on 2 cores: 1.45 busy.
	if got := BusyCores(ma, mb, 2, 2); got < 1.449 || got > 1.451 {
		t.Fatalf("busy cores %.3f, want 1.45", got)
	}
	if got := BusyCores(mb, ma, 2, 2); got != 0 {
		t.Fatalf("backwards interval: %.3f busy cores, want 0", got)
	}
	if got := BusyCores(ma, ma, 2, 2); got != 2 {
		t.Fatalf("no idle time: %.3f busy cores, want 2", got)
	}
	if _, err := fakeProc(t, map[string]string{"stat": "intr 1 2 3\n"}).Machine(); err == nil {
		t.Fatal("no cpu line: no error")
	}
	if _, err := (FS{}).Machine(); err != nil {
		t.Fatalf("this machine's /proc/stat: %v", err)
	}
}
