package loadgen

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ringlog/ringlog/results"
)

// A load agent (`ringlog loadgen agent`) runs one share of a distributed
// run for a controller (`ringlog loadgen --agents`, fleet.go). The protocol
// is HTTP/1.1 with JSON (docs/LOAD-AGENTS.md):
//
//	GET  /v1/hello  -> agentHello: the agent is reachable, the token is right, it is idle
//	POST /v1/run    <- agentRunRequest; -> 200 and a stream of JSON lines
//	                   (agentMsg): "interval" once a second while the run
//	                   goes on, "heartbeat" when nothing else was sent for a
//	                   second, then one "result" or "error" line, then EOF.
//
// Every request carries "Authorization: Bearer <token>". Each side bounds
// what it reads: request bodies to agentMaxRequest, every streamed line to
// agentMaxLine.

const (
	agentPathHello = "/v1/hello"
	agentPathRun   = "/v1/run"
	// agentMaxRequest bounds a run request's body (a Config in JSON is a
	// few KB).
	agentMaxRequest = 1 << 20
	// agentMaxLine bounds one streamed line: an interval carries three
	// compressed histograms (a few KB), the result one result.json.
	agentMaxLine = 4 << 20
	// agentHeartbeat is how often an agent with nothing else to say still
	// writes a line, so the controller can tell silence from death.
	agentHeartbeat = time.Second
)

// agentHello is GET /v1/hello's answer.
type agentHello struct {
	Hostname string `json:"hostname"`
	Cores    int    `json:"cores"`
	Version  string `json:"version,omitempty"`
}

// agentRunRequest is POST /v1/run's body: the agent's share of the
// workload, already split and validated by the controller, with the common
// StartAt.
type agentRunRequest struct {
	// Name is the agent's name in the controller's reports (its address).
	Name   string `json:"name"`
	Config Config `json:"config"`
}

// Streamed message types.
const (
	msgInterval  = "interval"
	msgHeartbeat = "heartbeat"
	msgResult    = "result"
	msgError     = "error"
)

// agentMsg is one streamed line of POST /v1/run's answer.
type agentMsg struct {
	Type     string          `json:"type"`
	Interval *intervalReport `json:"interval,omitempty"`
	// Result is the agent's result.json; its histograms are the intervals
	// already streamed (IntervalCount of them).
	Result        *results.Result `json:"result,omitempty"`
	IntervalCount int             `json:"interval_count,omitempty"`
	Error         string          `json:"error,omitempty"`
}

// intervalReport is one interval as a run cuts it (intervals.cut): the
// counters so far and, once measuring, the interval's histograms in
// HdrHistogram's compressed encoding (µs), start and end in Unix ms.
type intervalReport struct {
	// AtS is the run clock at the interval's end, in seconds.
	AtS    float64 `json:"at_s"`
	Warmup bool    `json:"warmup,omitempty"`
	// Sent, Acked and Errors count the whole run so far; the Measured
	// ones only after warmup, as result.json does.
	Sent          int64  `json:"sent"`
	Acked         int64  `json:"acked"`
	Errors        int64  `json:"errors"`
	MeasuredSent  int64  `json:"measured_sent"`
	MeasuredAcked int64  `json:"measured_acked"`
	StartMs       int64  `json:"start_ms,omitempty"`
	EndMs         int64  `json:"end_ms,omitempty"`
	Ack           []byte `json:"ack,omitempty"`
	SendDelay     []byte `json:"send_delay,omitempty"`
	E2E           []byte `json:"e2e,omitempty"`
}

// report describes the interval cut last, ending at run clock to.
func (iv *intervals) report(to int64) intervalReport {
	st := iv.st
	r := intervalReport{
		AtS: float64(to) / 1e9, Warmup: to <= st.measureNs,
		Sent: st.c.sent.Load(), Acked: st.c.acked.Load(), Errors: st.c.errors.Load(),
		MeasuredSent: st.c.measuredSent.Load(), MeasuredAcked: st.c.measuredAcked.Load(),
	}
	if r.Warmup || len(iv.ack) == 0 {
		return r
	}
	enc := func(hs []*hdr.Histogram) []byte {
		if len(hs) == 0 {
			return nil
		}
		b, err := hs[len(hs)-1].Encode(hdr.V2CompressedEncodingCookieBase)
		if err != nil {
			return nil // cannot happen for our histograms; the count check catches it
		}
		return b
	}
	a := iv.ack[len(iv.ack)-1]
	r.StartMs, r.EndMs = a.StartTimeMs(), a.EndTimeMs()
	r.Ack, r.SendDelay = enc(iv.ack), enc(iv.send)
	if st.cfg.Consumers > 0 {
		r.E2E = enc(iv.e2e)
	}
	return r
}

// histograms decodes the interval's histograms (nil ones stay nil).
func (r *intervalReport) histograms() (ack, send, e2e *hdr.Histogram, err error) {
	dec := func(b []byte) (*hdr.Histogram, error) {
		if len(b) == 0 {
			return nil, nil
		}
		h, err := hdr.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("interval at %.1fs: bad histogram: %w", r.AtS, err)
		}
		h.SetStartTimeMs(r.StartMs)
		h.SetEndTimeMs(r.EndMs)
		return h, nil
	}
	if ack, err = dec(r.Ack); err != nil {
		return
	}
	if send, err = dec(r.SendDelay); err != nil {
		return
	}
	e2e, err = dec(r.E2E)
	return
}

// AgentConfig is one `ringlog loadgen agent`.
type AgentConfig struct {
	// Listen is host:port (port 0: any free port).
	Listen string
	// Token must be carried by every request; empty is refused.
	Token string
	// AllowFrom, when not empty, lists the IPs and CIDRs that may
	// connect; connections from elsewhere are closed at accept.
	AllowFrom []string
	// Log gets one line per refused connection or request and per run.
	Log io.Writer
}

// Validate checks the agent's settings.
func (c *AgentConfig) Validate() error {
	if c.Token == "" {
		return errors.New("agent: no token: set --token or RINGLOG_AGENT_TOKEN (the controller passes the same with --agent-token)")
	}
	if c.Listen == "" {
		return errors.New("agent: --listen is empty")
	}
	_, err := parseAllowFrom(c.AllowFrom)
	return err
}

// parseAllowFrom turns IPs and CIDRs into networks.
func parseAllowFrom(list []string) ([]*net.IPNet, error) {
	var nets []*net.IPNet
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			ip := net.ParseIP(s)
			if ip == nil {
				return nil, fmt.Errorf("agent: --allow-from %q: not an IP or CIDR", s)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			nets = append(nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("agent: --allow-from %q: %v", s, err)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// allowListener closes connections from addresses outside allow.
type allowListener struct {
	net.Listener
	allow []*net.IPNet
	log   func(format string, args ...any)
}

func (l *allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || len(l.allow) == 0 {
			return c, err
		}
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			for _, n := range l.allow {
				if n.Contains(tcp.IP) {
					return c, nil
				}
			}
		}
		l.log("refused connection from %s: not in --allow-from", c.RemoteAddr())
		c.Close()
	}
}

// Agent serves runs for one controller at a time.
type Agent struct {
	cfg     AgentConfig
	tokenH  [sha256.Size]byte
	ln      net.Listener
	srv     *http.Server
	busy    atomic.Bool
	logMu   sync.Mutex
	running atomic.Pointer[string] // who the current run is for
}

// ListenAgent binds the agent's address; Serve then answers requests.
func ListenAgent(cfg AgentConfig) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	allow, _ := parseAllowFrom(cfg.AllowFrom)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{cfg: cfg, tokenH: sha256.Sum256([]byte(cfg.Token))}
	a.ln = &allowListener{Listener: ln, allow: allow, log: a.logf}
	mux := http.NewServeMux()
	mux.HandleFunc(agentPathHello, a.authorized(a.hello))
	mux.HandleFunc(agentPathRun, a.authorized(a.run))
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	return a, nil
}

// Addr is the bound address.
func (a *Agent) Addr() string { return a.ln.Addr().String() }

// Serve answers requests until ctx ends; a run in progress is cancelled.
func (a *Agent) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { a.srv.Close() })
	defer stop()
	err := a.srv.Serve(a.ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (a *Agent) logf(format string, args ...any) {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	fmt.Fprintf(a.cfg.Log, "%s agent: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
}

// checkToken compares in constant time (hashes first, so the length does
// not leak either).
func checkToken(want [sha256.Size]byte, header string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], want[:]) == 1
}

func (a *Agent) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !checkToken(a.tokenH, r.Header.Get("Authorization")) {
			a.logf("refused %s %s from %s: wrong or missing token", r.Method, r.URL.Path, r.RemoteAddr)
			http.Error(w, "wrong or missing agent token", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (a *Agent) hello(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	if who := a.running.Load(); who != nil {
		http.Error(w, "agent busy: running a load for "+*who, http.StatusConflict)
		return
	}
	host, _ := os.Hostname()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(agentHello{Hostname: host, Cores: runtime.NumCPU(), Version: Version})
}

func (a *Agent) run(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req agentRunRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, agentMaxRequest))
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "bad run request: "+err.Error(), http.StatusBadRequest)
		return
	}
	cfg := req.Config
	// Broker processes are the controller's to read: a pid means nothing
	// on this host.
	cfg.BrokerPIDs, cfg.CounterAdmins = nil, nil
	if err := cfg.Validate(); err != nil {
		http.Error(w, "bad run request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !a.busy.CompareAndSwap(false, true) {
		who := "another controller"
		if p := a.running.Load(); p != nil {
			who = *p
		}
		a.logf("refused run from %s: busy with %s", r.RemoteAddr, who)
		http.Error(w, "agent busy: running a load for "+who, http.StatusConflict)
		return
	}
	who := r.RemoteAddr
	a.running.Store(&who)
	defer func() { a.running.Store(nil); a.busy.Store(false) }()
	a.logf("run for %s as %s: %.0f msg/s, %d producers, start %s", r.RemoteAddr, req.Name, cfg.Rate, cfg.Producers, cfg.StartAt.Format(time.RFC3339Nano))

	cfg.Quiet = true
	cfg.Label = req.Name
	msgs := make(chan agentMsg, 64)
	cfg.onInterval = func(ir intervalReport) { msgs <- agentMsg{Type: msgInterval, Interval: &ir} }
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}

	type outcome struct {
		run *results.Run
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		run, err := Run(r.Context(), cfg, io.Discard)
		if run != nil {
			run.Result.Environment = Environment(cfg.BrokerAdmin, cfg.Client)
		}
		done <- outcome{run, err}
	}()
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	send := func(m agentMsg) bool {
		if err := enc.Encode(m); err != nil {
			return false
		}
		if err := bw.Flush(); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	// A failed send means the controller is gone: the request's context
	// then ends the run, and the loop keeps draining msgs until it does.
	intervals := 0
	beat := time.NewTicker(agentHeartbeat)
	defer beat.Stop()
	alive := true
	quiet := true
	for {
		select {
		case m := <-msgs:
			if m.Interval != nil && !m.Interval.Warmup && len(m.Interval.Ack) > 0 {
				intervals++
			}
			alive = alive && send(m)
			quiet = false
		case <-beat.C:
			if quiet {
				alive = alive && send(agentMsg{Type: msgHeartbeat})
			}
			quiet = true
		case o := <-done:
			// Intervals are sent before Run returns; drain what is queued.
			for len(msgs) > 0 {
				m := <-msgs
				if m.Interval != nil && !m.Interval.Warmup && len(m.Interval.Ack) > 0 {
					intervals++
				}
				alive = alive && send(m)
			}
			switch {
			case o.err != nil:
				a.logf("run for %s failed: %v", who, o.err)
				send(agentMsg{Type: msgError, Error: o.err.Error()})
			default:
				a.logf("run for %s done: %d acked, %d errors", who, o.run.Result.MessagesAcked, o.run.Result.Errors)
				send(agentMsg{Type: msgResult, Result: &o.run.Result, IntervalCount: intervals})
			}
			return
		}
	}
}
