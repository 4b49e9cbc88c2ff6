//go:build linux

package serveflags

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

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

// faultHandler serves /debug/ringlog/faults for efs.
func faultHandler(efs *vfs.ErrorFS, log *slog.Logger) http.Handler {
	return loopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodDelete:
			efs.Clear()
			log.Warn("fault injection: faults cleared")
		case http.MethodPost:
			var req vfs.FaultRequest
			dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				http.Error(w, "bad fault: "+err.Error(), http.StatusBadRequest)
				return
			}
			f, err := req.Fault()
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
