package broker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath"
)

// Health is the /healthz document. Load-generator reports read io_path and
// fsync from it to label results.
type Health struct {
	// Status is "starting" until the broker joined the cluster (registered,
	// caught up, unfenced) and its Kafka listeners accept, then "ok".
	Status    string `json:"status"`
	NodeID    int32  `json:"node_id"`
	ClusterID string `json:"cluster_id"`
	// ControllerID is the active controller as this node knows it (-1
	// during an election); BrokerState is controller.Node.BrokerState.
	ControllerID int32             `json:"controller_id"`
	BrokerState  string            `json:"broker_state"`
	Controllers  []string          `json:"controllers,omitempty"`
	Version      string            `json:"version"`
	Commit       string            `json:"commit,omitempty"`
	IOPath       string            `json:"io_path"`
	IOReason     string            `json:"io_reason,omitempty"`
	Fsync        string            `json:"fsync"`
	FetchPath    map[string]string `json:"fetch_path"`
	PID          int               `json:"pid"`
	// MaxProcs is GOMAXPROCS, NumCPU the CPUs the process may run on:
	// benchmark reports record both (brokers sharing a machine split it).
	MaxProcs int `json:"max_procs"`
	NumCPU   int `json:"num_cpu"`
	// SchedPolicy is the Linux scheduling policy of the broker's
	// threads (serve --sched-policy).
	SchedPolicy string        `json:"sched_policy,omitempty"`
	Uptime      string        `json:"uptime"`
	Stats       netpath.Stats `json:"stats"`
	// Disk is the data directory's free space and produce threshold;
	// disk.degraded means produce is refused (docs/disk-full.md).
	Disk *engine.DiskStatus `json:"disk,omitempty"`
}

// AdminServer is the HTTP admin listener: /healthz, /metrics (registered
// by the caller on Mux), pprof later.
type AdminServer struct {
	srv *http.Server
	ln  net.Listener
	Mux *http.ServeMux
}

// StartAdmin serves the admin endpoints on addr. health is called per
// request so the document is always current.
func StartAdmin(addr string, health func() Health, log *slog.Logger) (*AdminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(health())
	})
	a := &AdminServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, Mux: mux}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener failed", "err", err)
		}
	}()
	log.Info("admin listener started", "addr", ln.Addr().String())
	return a, nil
}

// Addr is the bound address.
func (a *AdminServer) Addr() net.Addr { return a.ln.Addr() }

// Close stops the admin listener.
func (a *AdminServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return a.srv.Shutdown(ctx)
}
