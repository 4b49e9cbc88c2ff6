package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// perf support: `perf record -g -p PID` on a broker for the measured
// window, then `perf script` folded into one line per distinct stack
// ("root;...;leaf count", the format flame graph tools read). perf often
// cannot run (not installed, a container without perf_event_open,
// perf_event_paranoid, a broker on another host): perfUnavailable says
// why, and the run goes on without it.

// perfUnavailable reports why perf cannot record pid here, or "" when it
// can: it looks for the binary, then records the process for 50 ms.
func perfUnavailable(bin string, pid int) string {
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Sprintf("perf not found (%q: %v)", bin, err)
	}
	if pid <= 0 {
		return "the broker's /healthz reports no pid"
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return fmt.Sprintf("broker process %d is not on this machine (perf only records local processes)", pid)
	}
	tmp, err := os.CreateTemp("", "ringlog-perf-probe-*.data")
	if err != nil {
		return err.Error()
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(path, "record", "-q", "-o", tmp.Name(), "-p", strconv.Itoa(pid), "--", "sleep", "0.05")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("`perf record -p %d` failed: %v: %s%s", pid, err, firstLines(string(out), 3), paranoidHint())
	}
	return ""
}

// paranoidHint names the kernel setting that usually stops perf.
func paranoidHint() string {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return " (no /proc/sys/kernel/perf_event_paranoid: perf events may be unsupported here)"
	}
	return fmt.Sprintf(" (kernel.perf_event_paranoid=%s; recording another process needs <= 2 for user stacks or CAP_PERFMON)", strings.TrimSpace(string(b)))
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// perfRecording is a running `perf record`.
type perfRecording struct {
	bin, data string
	cmd       *exec.Cmd
	stderr    bytes.Buffer
	exited    chan error
}

// startPerf starts `perf record -g` on pid at freq samples per second,
// writing to data. Samples are stamped with CLOCK_MONOTONIC (Go's
// monotonic clock on Linux), so the caller can start perf early (it takes
// a while to attach) and keep exactly the samples of its window.
func startPerf(bin string, pid, freq int, data string) (*perfRecording, error) {
	r := &perfRecording{bin: bin, data: data, exited: make(chan error, 1)}
	r.cmd = exec.Command(bin, "record", "-g", "-k", "monotonic", "-F", strconv.Itoa(freq), "-p", strconv.Itoa(pid), "-o", data)
	r.cmd.Stdout, r.cmd.Stderr = io.Discard, &r.stderr
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { r.exited <- r.cmd.Wait() }()
	return r, nil
}

// stop ends the recording (perf writes its file on SIGINT) and returns
// `perf script` of it.
func (r *perfRecording) stop() ([]byte, error) {
	r.cmd.Process.Signal(syscall.SIGINT)
	var waitErr error
	select {
	case waitErr = <-r.exited:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
		return nil, errors.New("perf record did not exit 30 s after SIGINT")
	}
	if st, err := os.Stat(r.data); err != nil || st.Size() == 0 {
		return nil, fmt.Errorf("perf record wrote nothing (%v): %s", waitErr, firstLines(r.stderr.String(), 3))
	}
	out, err := exec.Command(r.bin, "script", "-i", r.data).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, firstLines(string(ee.Stderr), 3))
		}
		return nil, fmt.Errorf("perf script: %w", err)
	}
	return out, nil
}

// FoldPerfScript folds `perf script` output (a header line per sample,
// then one tab-indented frame per line, leaf first, then a blank line)
// into stack -> sample count, stacks written root first with ';' between
// frames. The thread's command name is the root frame; symbol offsets are
// dropped, so samples in one function merge; kernel frames get a "_[k]"
// suffix and unresolved ones name their object file. With to > 0 only
// samples stamped within [from, to] (seconds, perf's clock) are kept.
func FoldPerfScript(r io.Reader, from, to float64) (map[string]int, int, error) {
	folded := map[string]int{}
	samples := 0
	var comm string
	var keep bool
	var frames []string
	flush := func() {
		if comm == "" || !keep {
			comm, frames = "", frames[:0]
			return
		}
		stack := make([]string, 0, len(frames)+1)
		stack = append(stack, comm)
		for i := len(frames) - 1; i >= 0; i-- {
			stack = append(stack, frames[i])
		}
		folded[strings.Join(stack, ";")]++
		samples++
		comm, frames = "", frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == '\t':
			// Frames are tab-indented; headers may be space-padded.
			if comm != "" {
				frames = append(frames, perfFrame(strings.TrimSpace(line)))
			}
		default:
			flush()
			var ts float64
			comm, ts = perfHeader(line)
			keep = to <= 0 || (ts >= from && ts <= to)
		}
	}
	flush()
	return folded, samples, sc.Err()
}

// perfHeader takes the command name and the timestamp (-1 when there is
// none) from a sample header such as
// "ringlog 19089 [001] 1069.142726:    5025125 cpu-clock:pppH:". Names may
// hold spaces, so the name ends before the first all-digit field (the
// tid, or pid/tid); the timestamp is the first later field that is a
// number followed by ':'.
func perfHeader(header string) (string, float64) {
	fields := strings.Fields(header)
	if len(fields) == 0 {
		return "[unknown]", -1
	}
	comm, rest := sanitizeFrame(fields[0]), fields[1:]
	for i, f := range fields {
		if i > 0 && isTID(f) {
			comm, rest = sanitizeFrame(strings.Join(fields[:i], " ")), fields[i+1:]
			break
		}
	}
	for _, f := range rest {
		if ts, ok := strings.CutSuffix(f, ":"); ok {
			if v, err := strconv.ParseFloat(ts, 64); err == nil {
				return comm, v
			}
		}
	}
	return comm, -1
}

func isTID(f string) bool {
	for _, part := range strings.Split(f, "/") {
		if _, err := strconv.Atoi(part); err != nil {
			return false
		}
	}
	return true
}

// perfFrame turns "ffffffff8158f476 filemap_read+0x3a6 ([kernel.kallsyms])"
// into "filemap_read_[k]", and "de0e [unknown] (/usr/bin/x)" into
// "[unknown x]".
func perfFrame(line string) string {
	_, rest, ok := strings.Cut(line, " ")
	if !ok {
		return sanitizeFrame(line)
	}
	rest = strings.TrimSpace(rest)
	sym, dso := rest, ""
	if i := strings.LastIndex(rest, " ("); i >= 0 && strings.HasSuffix(rest, ")") {
		sym, dso = rest[:i], rest[i+2:len(rest)-1]
	}
	if i := strings.LastIndex(sym, "+0x"); i > 0 {
		sym = sym[:i]
	}
	switch {
	case sym == "[unknown]" && dso != "":
		sym = "[unknown " + filepath.Base(dso) + "]"
	case strings.HasPrefix(dso, "[kernel"):
		sym += "_[k]"
	}
	return sanitizeFrame(sym)
}

// sanitizeFrame keeps the folded format parseable: no separators inside
// a frame.
func sanitizeFrame(s string) string {
	return strings.NewReplacer(";", ":", "\n", " ").Replace(s)
}

// WriteFolded writes stacks in the folded format, sorted by stack.
func WriteFolded(w io.Writer, folded map[string]int) error {
	stacks := make([]string, 0, len(folded))
	for s := range folded {
		stacks = append(stacks, s)
	}
	sort.Strings(stacks)
	bw := bufio.NewWriter(w)
	for _, s := range stacks {
		fmt.Fprintf(bw, "%s %d\n", s, folded[s])
	}
	return bw.Flush()
}
