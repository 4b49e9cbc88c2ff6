package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ringlog/ringlog/results"
)

// Broker CPU per GB: for brokers the harness started itself (ringlog bench)
// it knows the pids, and reads their CPU time from /proc at the start and
// the end of the measured window.

// userHZ is the unit of /proc/<pid>/stat's utime and stime: USER_HZ, which
// the kernel fixes at 100 for user space on every architecture Go runs
// Linux on, whatever CONFIG_HZ is.
const userHZ = 100

// procCPUSeconds returns the user plus system CPU time of process pid: all
// its threads, live and exited, which includes the io_uring io-wq workers
// (they belong to the process's thread group).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis (field 3 onwards).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	u, err1 := strconv.ParseUint(string(f[utime]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[stime]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[utime], f[stime])
	}
	return float64(u+s) / userHZ, nil
}

// cpuSample sums the CPU time of pids.
func cpuSample(pids []int) (float64, error) {
	var sum float64
	for _, pid := range pids {
		s, err := procCPUSeconds(pid)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum, nil
}

// cpuWindow measures the CPU time of pids from start until start+d (or
// until ctx ends, for an interrupted run). done is closed when it has.
type cpuWindow struct {
	pids    []int
	done    chan struct{}
	seconds float64
	window  time.Duration
	err     error
}

func startCPUWindow(ctx context.Context, pids []int, start time.Time, d time.Duration) *cpuWindow {
	w := &cpuWindow{pids: pids, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTimer(time.Until(start))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			w.err = ctx.Err()
			return
		}
		c0, err := cpuSample(pids)
		t0 := time.Now()
		if err != nil {
			w.err = err
			return
		}
		t.Reset(time.Until(start.Add(d)))
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		c1, err := cpuSample(pids)
		w.window = time.Since(t0)
		w.seconds, w.err = c1-c0, err
	}()
	return w
}

// result waits for the window and returns its CPU per GB of bytes
// acknowledged, or nil when it could not be measured (a reason goes to
// warn).
func (w *cpuWindow) result(bytes int64) (*results.BrokerCPU, error) {
	<-w.done
	if w.err != nil {
		return nil, w.err
	}
	c := &results.BrokerCPU{Processes: len(w.pids), WindowS: w.window.Seconds(), Seconds: w.seconds}
	if bytes > 0 {
		c.PerGB = w.seconds / (float64(bytes) / 1e9)
	}
	return c, nil
}
