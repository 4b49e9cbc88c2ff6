// Package procstat reads what a process costs the machine: its CPU time
// and its threads' context switches, from Linux's /proc for any process
// on this machine, and from getrusage for the calling process itself.
//
// The two sources differ in one way that matters for a measurement: the
// kernel keeps a thread's context-switch counts in /proc/PID/task/TID/status
// only while the thread lives, so a sum over the live threads loses what a
// thread that exited had counted; getrusage(RUSAGE_SELF) adds the exited
// threads' counts back (the kernel folds them into the thread group when
// they exit), as /proc/PID/stat's utime and stime do for CPU time. io_uring
// io-wq workers (iou-wrk-TID) are threads of the process that owns the
// ring and count with it.
package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// UserHZ is the unit of /proc/PID/stat's utime and stime: USER_HZ, which
// the kernel fixes at 100 for user space on every architecture Go runs
// Linux on, whatever CONFIG_HZ is.
const UserHZ = 100

// Thread is one thread's context switches since it started.
type Thread struct {
	TID int `json:"tid"`
	// Name is the thread's comm (15 bytes at most): the executable's name
	// for Go's threads, iou-wrk-PID for io_uring workers.
	Name        string `json:"name"`
	Voluntary   uint64 `json:"voluntary"`
	Involuntary uint64 `json:"involuntary"`
}

// CountersPath is where a ringlog broker's admin listener serves its own
// Snapshot (Self) as JSON.
const CountersPath = "/v1/process/counters"

// Snapshot is one reading of a process's cumulative counters. It is also
// the document a ringlog broker's admin listener serves at
// /v1/process/counters.
type Snapshot struct {
	PID  int    `json:"pid"`
	Name string `json:"name,omitempty"` // the process's comm
	// CPUSeconds is user plus system CPU time of every thread, live and
	// exited.
	CPUSeconds float64 `json:"cpu_s"`
	// Voluntary and Involuntary are the process's context switches: from
	// getrusage when ExitedIncluded (exited threads counted), otherwise the
	// sum over Threads (live threads only).
	Voluntary      uint64 `json:"voluntary_ctxt_switches"`
	Involuntary    uint64 `json:"nonvoluntary_ctxt_switches"`
	ExitedIncluded bool   `json:"exited_threads_included"`
	// Threads are the live threads at the reading.
	Threads []Thread `json:"threads,omitempty"`
	// BootID is the kernel's boot id: two readings with the same one come
	// from the same machine (and kernel), sharing its CPUs.
	BootID string `json:"boot_id,omitempty"`
	// Cores is the CPUs the reading process may run on.
	Cores int `json:"cores,omitempty"`
}

// FS reads a /proc tree; Root "" is /proc (tests use a fake tree).
type FS struct{ Root string }

func (p FS) path(parts ...string) string {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// Process reads pid's CPU time and its live threads' context switches
// (ExitedIncluded false).
func (p FS) Process(pid int) (Snapshot, error) {
	s := Snapshot{PID: pid}
	var err error
	if s.Name, s.CPUSeconds, err = p.stat(pid); err != nil {
		return s, err
	}
	if s.Threads, err = p.Threads(pid); err != nil {
		return s, err
	}
	for _, t := range s.Threads {
		s.Voluntary += t.Voluntary
		s.Involuntary += t.Involuntary
	}
	s.BootID, s.Cores = p.BootID(), runtime.NumCPU()
	return s, nil
}

// CPUSeconds is pid's user plus system CPU time, every thread live and
// exited, from /proc/PID/stat.
func (p FS) CPUSeconds(pid int) (float64, error) {
	_, s, err := p.stat(pid)
	return s, err
}

func (p FS) stat(pid int) (name string, cpu float64, err error) {
	file := p.path(strconv.Itoa(pid), "stat")
	b, err := os.ReadFile(file)
	if err != nil {
		return "", 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: count fields after the last closing one (field 3
	// onwards).
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("%s: no command name", file)
	}
	f := bytes.Fields(b[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return "", 0, fmt.Errorf("%s: %d fields", file, len(f)+2)
	}
	u, err1 := strconv.ParseUint(string(f[utime]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[stime]), 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("%s: utime %q stime %q", file, f[utime], f[stime])
	}
	return string(b[open+1 : end]), float64(u+s) / UserHZ, nil
}

// Threads reads the context switches of every live thread of pid, from
// /proc/PID/task/TID/status and the name from .../comm, in TID order. A
// thread that exits while it is read is left out.
func (p FS) Threads(pid int) ([]Thread, error) {
	ents, err := os.ReadDir(p.path(strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	var out []Thread
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := p.thread(pid, tid)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // exited meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no threads", p.path(strconv.Itoa(pid), "task"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out, nil
}

func (p FS) thread(pid, tid int) (Thread, error) {
	t := Thread{TID: tid}
	dir := p.path(strconv.Itoa(pid), "task", strconv.Itoa(tid))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return t, err
	}
	t.Name = strings.TrimSuffix(string(comm), "\n")
	f, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		return t, err
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "voluntary_ctxt_switches":
			dst = &t.Voluntary
		case "nonvoluntary_ctxt_switches":
			dst = &t.Involuntary
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return t, fmt.Errorf("%s/status: %s %q", dir, k, v)
		}
		*dst = n
		found++
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if found != 2 {
		return t, fmt.Errorf("%s/status: no voluntary_ctxt_switches and nonvoluntary_ctxt_switches", dir)
	}
	return t, nil
}

// BootID is the kernel's boot id, "" when it cannot be read.
func (p FS) BootID() string {
	b, err := os.ReadFile(p.path("sys", "kernel", "random", "boot_id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Usage is the calling process's getrusage(RUSAGE_SELF): every thread,
// exited ones included.
type Usage struct {
	UserSeconds, SystemSeconds float64
	Voluntary, Involuntary     uint64
}

// CPUSeconds is user plus system time.
func (u Usage) CPUSeconds() float64 { return u.UserSeconds + u.SystemSeconds }

// Rusage reads getrusage(RUSAGE_SELF).
func Rusage() (Usage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, err
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Nano()) / 1e9 }
	return Usage{UserSeconds: tv(ru.Utime), SystemSeconds: tv(ru.Stime),
		Voluntary: uint64(ru.Nvcsw), Involuntary: uint64(ru.Nivcsw)}, nil
}

// Self is the calling process's snapshot: CPU time and context switches
// from getrusage (exited threads included), the per-thread switches of
// its live threads from p. Without a /proc it still has the totals.
func Self(p FS) (Snapshot, error) {
	// The threads first: getrusage, read after, then never counts less
	// than their sum.
	pid := os.Getpid()
	s := Snapshot{PID: pid, ExitedIncluded: true, Cores: runtime.NumCPU(), BootID: p.BootID()}
	s.Threads, _ = p.Threads(pid) // without a /proc (not Linux): the totals only
	if name, _, err := p.stat(pid); err == nil {
		s.Name = name
	}
	u, err := Rusage()
	if err != nil {
		return s, err
	}
	s.CPUSeconds, s.Voluntary, s.Involuntary = u.CPUSeconds(), u.Voluntary, u.Involuntary
	return s, nil
}

// GroupName is the name threads are grouped by in reports: comm with a
// trailing number replaced by "*", so io_uring's iou-wrk-1234 workers
// group as iou-wrk-* and a JVM's "GC Thread#3" as "GC Thread#*".
func GroupName(comm string) string {
	i := len(comm)
	for i > 0 && comm[i-1] >= '0' && comm[i-1] <= '9' {
		i--
	}
	if i == len(comm) || i == 0 {
		return comm
	}
	return comm[:i] + "*"
}

// MachineCPU is the machine's idle time from the first line of
// /proc/stat: idle and iowait, in clock ticks summed over every CPU. Busy
// time is the wall-clock capacity less this: the kernel counts idle time
// exactly (nohz), where the busy fields only sample ticks and miss work
// done between two of them, which a broker answering short requests
// mostly is. Steal (a VM's CPU taken by the host) counts as busy: the
// processes' own CPU times include it, and on our VM, left out, it put
// the machine below the two processes it ran.
type MachineCPU struct {
	Idle uint64
}

// userHZ is the clock tick of /proc/stat, fixed by the kernel's ABI.
const userHZ = 100

// Machine reads /proc/stat's cpu line.
func (p FS) Machine() (MachineCPU, error) {
	b, err := os.ReadFile(p.path("stat"))
	if err != nil {
		return MachineCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("%s: no cpu line", p.path("stat"))
	}
	var v [5]uint64 // user nice system idle iowait
	for i := range v {
		if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
			return MachineCPU{}, fmt.Errorf("%s: %w", p.path("stat"), err)
		}
	}
	return MachineCPU{Idle: v[3] + v[4]}, nil
}

// BusyCores is how many of cores were busy on average between readings
// a and b taken wall seconds apart.
func BusyCores(a, b MachineCPU, wall float64, cores int) float64 {
	if wall <= 0 || b.Idle < a.Idle {
		return 0
	}
	idle := float64(b.Idle-a.Idle) / userHZ / wall
	return min(float64(cores), max(0, float64(cores)-idle))
}
