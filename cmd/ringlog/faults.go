//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/internal/vfs"
)

// Fault injection on a running broker: a test facility, not an operator
// tool. With --fault-injection the engine's files go through a
// vfs.ErrorFS over the OS file system (the io_uring write path consults
// its faults too), and the admin listener serves, to loopback clients only:
//
//	POST   /debug/ringlog/faults  {"op":"write"|"fsync", "topic":"t", "partition":0,
//	                               "errno":"EIO", "delay_ms":0, "skip":0, "count":0}
//	DELETE /debug/ringlog/faults  remove every fault
//	GET    /debug/ringlog/faults  {"fired": N}
//
// A fault matches the files of one partition (topic and partition) or,
// with "path_contains", any path containing that text. "errno" (EIO,
// ENOSPC, EROFS) fails matching calls; "delay_ms" alone delays them (a
// slow disk; on the io_uring path fsyncs only). Skip and count as in
// vfs.Fault: count 0 means every later matching call. Off by default:
// without the flag the endpoint does not exist.

// faultRequest is the POST body.
type faultRequest struct {
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

func (r faultRequest) fault() (vfs.Fault, error) {
	f := vfs.Fault{Skip: r.Skip, Count: r.Count, Delay: time.Duration(r.DelayMs) * time.Millisecond}
	switch r.Op {
	case "write":
		f.Op = vfs.OpWrite
	case "fsync":
		f.Op = vfs.OpSync
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

// faultHandler serves /debug/ringlog/faults for efs.
func faultHandler(efs *vfs.ErrorFS, log *slog.Logger) http.Handler {
	return loopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodDelete:
			efs.Clear()
			log.Warn("fault injection: faults cleared")
		case http.MethodPost:
			var req faultRequest
			dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				http.Error(w, "bad fault: "+err.Error(), http.StatusBadRequest)
				return
			}
			f, err := req.fault()
			if err != nil {
				http.Error(w, "bad fault: "+err.Error(), http.StatusBadRequest)
				return
			}
			efs.Inject(f)
			log.Warn("fault injection: fault added", "op", req.Op, "path_contains", f.PathContains, "err", f.Err, "delay", f.Delay, "skip", f.Skip, "count", f.Count)
		default:
			http.Error(w, "GET, POST or DELETE", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"fired": efs.Fired()})
	}))
}
