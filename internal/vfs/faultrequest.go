package vfs

import (
	"fmt"
	"strconv"
	"syscall"
	"time"
)

// FaultRequest is the JSON body of a fault-injection request (the
// broker's /debug/ringlog/faults endpoint, used by tests that fail a
// running broker's disk).
type FaultRequest struct {
	Op           string `json:"op"`
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	PathContains string `json:"path_contains"`
	Errno        string `json:"errno"`
	DelayMs      int64  `json:"delay_ms"`
	Skip         int    `json:"skip"`
	Count        int    `json:"count"`
}

var faultErrnos = map[string]syscall.Errno{"EIO": syscall.EIO, "ENOSPC": syscall.ENOSPC, "EROFS": syscall.EROFS}

// maxFaultDelay bounds an injected delay: a typo must not hang a broker
// for a day.
const maxFaultDelay = 10 * time.Minute

// Fault checks the request and turns it into a Fault.
func (r FaultRequest) Fault() (Fault, error) {
	f := Fault{Skip: r.Skip, Count: r.Count, Delay: time.Duration(r.DelayMs) * time.Millisecond}
	switch r.Op {
	case "write":
		f.Op = OpWrite
	case "fsync":
		f.Op = OpSync
	default:
		return f, fmt.Errorf("op %q: want write or fsync", r.Op)
	}
	switch {
	case r.PathContains != "" && r.Topic == "":
		f.PathContains = r.PathContains
	case r.Topic != "" && r.PathContains == "" && r.Partition >= 0:
		// Segment files live in <data-dir>/<topic>-<partition>/.
		f.PathContains = "/" + r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "/"
	default:
		return f, fmt.Errorf("give topic and partition, or path_contains")
	}
	if r.Errno != "" {
		errno, ok := faultErrnos[r.Errno]
		if !ok {
			return f, fmt.Errorf("errno %q: want EIO, ENOSPC or EROFS", r.Errno)
		}
		f.Err = errno
	}
	switch {
	case f.Err == nil && f.Delay <= 0:
		return f, fmt.Errorf("give errno, delay_ms or both")
	case f.Delay < 0 || f.Delay > maxFaultDelay || r.Skip < 0 || r.Count < 0:
		return f, fmt.Errorf("delay_ms in [0, %d], skip and count >= 0", maxFaultDelay.Milliseconds())
	}
	return f, nil
}
