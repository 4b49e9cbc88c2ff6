package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/loadgen/nullsink"
	"github.com/ringlog/ringlog/results"
)

func TestSplitLoad(t *testing.T) {
	for _, tc := range []struct {
		rate      float64
		producers int
		n         int
		want      []int
	}{
		{30000, 3, 3, []int{1, 1, 1}},
		{30000, 4, 3, []int{2, 1, 1}},
		{30000, 8, 3, []int{3, 3, 2}},
		{1000, 1, 3, []int{1, 1, 1}}, // fewer producers than agents: one each
		{7, 5, 1, []int{5}},
	} {
		shares := splitLoad(tc.rate, tc.producers, tc.n)
		var rate float64
		total := 0
		for i, s := range shares {
			if s.Producers != tc.want[i] {
				t.Errorf("%v over %d: agent %d has %d producers, want %v", tc, tc.n, i, s.Producers, tc.want)
			}
			rate += s.Rate
			total += s.Producers
		}
		if d := rate - tc.rate; d > 1e-6 || d < -1e-6 {
			t.Errorf("%v: rates sum to %v", tc, rate)
		}
		// Every producer of the fleet runs at the same rate.
		per := tc.rate / float64(total)
		for _, s := range shares {
			if d := s.Rate/float64(s.Producers) - per; d > 1e-6 || d < -1e-6 {
				t.Errorf("%v: share %+v: %v msg/s per producer, want %v", tc, s, s.Rate/float64(s.Producers), per)
			}
		}
	}
}

// startTestAgent serves an agent on a free loopback port until the test
// ends.
func startTestAgent(t *testing.T, cfg AgentConfig) (*Agent, *lockedBuf, func()) {
	t.Helper()
	log := &lockedBuf{}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	cfg.Log = log
	a, err := ListenAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Serve(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return a, log, stop
}

// lockedBuf is a buffer the agent writes its log to while the test reads.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func agentGet(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+agentPathHello, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAgentToken: no token, no agent; a request without the token or with
// a wrong one is refused and logged; the right one is answered.
func TestAgentToken(t *testing.T) {
	if _, err := ListenAgent(AgentConfig{Listen: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("agent without a token: %v, want refused", err)
	}
	a, log, _ := startTestAgent(t, AgentConfig{Token: "s3cret"})
	for _, tok := range []string{"", "wrong", "s3cret-longer", "s3cre"} {
		if code, body := agentGet(t, a.Addr(), tok); code != http.StatusUnauthorized {
			t.Errorf("token %q: %d %s, want 401", tok, code, body)
		}
	}
	if !strings.Contains(log.String(), "wrong or missing token") {
		t.Errorf("refusals not logged: %q", log.String())
	}
	code, body := agentGet(t, a.Addr(), "s3cret")
	var h agentHello
	if code != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil || h.Cores < 1 {
		t.Errorf("right token: %d %s", code, body)
	}
	var want [32]byte
	copy(want[:], a.tokenH[:])
	if checkToken(want, "s3cret") || !checkToken(want, "Bearer s3cret") {
		t.Error("checkToken: wants the Bearer scheme")
	}
}

// TestAgentAllowFrom: connections from outside --allow-from are closed
// before any request is read; bad entries are refused at start.
func TestAgentAllowFrom(t *testing.T) {
	for _, bad := range []string{"10.0.0.300", "nonsense", "10.0.0.0/40"} {
		if _, err := ListenAgent(AgentConfig{Listen: "127.0.0.1:0", Token: "t", AllowFrom: []string{bad}}); err == nil {
			t.Errorf("--allow-from %q accepted", bad)
		}
	}
	a, log, _ := startTestAgent(t, AgentConfig{Token: "t", AllowFrom: []string{"10.0.0.0/8", "192.168.1.1"}})
	if code, body := agentGet(t, a.Addr(), "t"); code != 0 {
		t.Errorf("from 127.0.0.1 outside --allow-from: %d %s, want the connection closed", code, body)
	}
	if !strings.Contains(log.String(), "not in --allow-from") {
		t.Errorf("closed connection not logged: %q", log.String())
	}
	b, _, _ := startTestAgent(t, AgentConfig{Token: "t", AllowFrom: []string{"127.0.0.0/8"}})
	if code, body := agentGet(t, b.Addr(), "t"); code != http.StatusOK {
		t.Errorf("from 127.0.0.1 inside --allow-from: %d %s", code, body)
	}
}

func agentPost(t *testing.T, ctx context.Context, addr, token string, body io.Reader) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+agentPathRun, body)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAgentRunRequests: oversized and invalid run requests are refused
// with a reason; while a run is in progress a second one is refused as
// busy, and the hello says so too.
func TestAgentRunRequests(t *testing.T) {
	a, _, _ := startTestAgent(t, AgentConfig{Token: "t"})
	ctx := context.Background()
	big := strings.NewReader(`{"name":"` + strings.Repeat("x", agentMaxRequest) + `"}`)
	for name, body := range map[string]io.Reader{
		"oversized": big,
		"not json":  strings.NewReader("{"),
		"invalid":   strings.NewReader(`{"name":"x","config":{"Rate":-1}}`),
	} {
		resp := agentPost(t, ctx, a.Addr(), "t", body)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "bad run request") {
			t.Errorf("%s request: %d %s, want 400", name, resp.StatusCode, msg)
		}
	}

	sink, err := nullsink.Listen("127.0.0.1:0", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	cfg := DefaultConfig()
	cfg.Bootstrap = []string{sink.Addr()}
	cfg.StartAt = time.Now().Add(time.Minute) // stays busy until cancelled
	body, _ := json.Marshal(agentRunRequest{Name: "first", Config: cfg})
	runCtx, cancel := context.WithCancel(ctx)
	first := agentPost(t, runCtx, a.Addr(), "t", bytes.NewReader(body))
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first run: %s", first.Status)
	}
	second := agentPost(t, ctx, a.Addr(), "t", bytes.NewReader(body))
	msg, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusConflict || !strings.Contains(string(msg), "busy") {
		t.Errorf("second run while busy: %d %s, want 409 busy", second.StatusCode, msg)
	}
	if code, body := agentGet(t, a.Addr(), "t"); code != http.StatusConflict {
		t.Errorf("hello while busy: %d %s, want 409", code, body)
	}
	cancel()
	first.Body.Close()
	// Once the run ends the agent takes the next one.
	testwait.For(t, 5*time.Second, "the agent free after the controller left", func() bool {
		code, _ := agentGet(t, a.Addr(), "t")
		return code == http.StatusOK
	})
}

// TestReadAgentStream: lines are read up to the limit; a longer line or a
// line that is not JSON ends the stream with an error.
func TestReadAgentStream(t *testing.T) {
	var got []agentMsg
	in := `{"type":"heartbeat"}` + "\n" + `{"type":"interval","interval":{"at_s":1,"warmup":true}}` + "\n"
	if err := readAgentStream(strings.NewReader(in), agentMaxLine, func(m agentMsg) { got = append(got, m) }); err != io.EOF {
		t.Fatalf("good stream: %v", err)
	}
	if len(got) != 2 || got[1].Interval == nil || got[1].Interval.AtS != 1 {
		t.Fatalf("got %+v", got)
	}
	const limit = 100 << 10 // small, for speed; the agents' is agentMaxLine
	long := `{"type":"error","error":"` + strings.Repeat("x", limit) + `"}` + "\n"
	n := 0
	err := readAgentStream(strings.NewReader(long), limit, func(agentMsg) { n++ })
	if err == nil || !strings.Contains(err.Error(), "longer than") || n != 0 {
		t.Errorf("oversized line: %v after %d messages", err, n)
	}
	if err := readAgentStream(strings.NewReader("not json\n"), limit, func(agentMsg) {}); err == nil || !strings.Contains(err.Error(), "bad message") {
		t.Errorf("bad line: %v", err)
	}
	// A line just under the limit is fine (no newline at EOF either).
	ok := `{"type":"error","error":"` + strings.Repeat("x", limit-40) + `"}`
	if err := readAgentStream(bufio.NewReader(strings.NewReader(ok)), limit, func(agentMsg) {}); err != io.EOF {
		t.Errorf("line under the limit: %v", err)
	}
}

// nullSinkFleet is two in-process agents and a null sink with 2
// partitions, the fleet's start lead shortened; stop2 stops the second
// agent.
func nullSinkFleet(t *testing.T) (cfg Config, agents []string, stop2 func()) {
	t.Helper()
	lead := fleetStartLead
	fleetStartLead = 200 * time.Millisecond
	t.Cleanup(func() { fleetStartLead = lead })
	sink, err := nullsink.Listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	a1, _, _ := startTestAgent(t, AgentConfig{Token: "t"})
	a2, _, stop2 := startTestAgent(t, AgentConfig{Token: "t"})
	cfg = DefaultConfig()
	cfg.Bootstrap = []string{sink.Addr()}
	cfg.Partitions = 2
	cfg.Warmup = 0
	return cfg, []string{a1.Addr(), a2.Addr()}, stop2
}

// TestFleetNullSink: two in-process agents against the null sink; the
// merged result is the sum of the parts the controller wrote, and the
// same as results.MergeDirs of those parts.
func TestFleetNullSink(t *testing.T) {
	cfg, agents, _ := nullSinkFleet(t)
	cfg.Rate, cfg.Producers = 3000, 3
	cfg.Duration = 400 * time.Millisecond
	// "The broker" is this process: the controller reads it, the agents
	// (in this process too) must not.
	cfg.BrokerPIDs = []int{os.Getpid()}
	dir := t.TempDir()
	var out bytes.Buffer
	run, err := runFleet(context.Background(), cfg, agents, "t", dir, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	res := run.Result
	if c := res.BrokerCPU; c == nil || len(c.Brokers) != 1 || c.Brokers[0].PID != os.Getpid() || c.SameHost ||
		c.MessagesAcked != res.MessagesAcked || len(res.Warnings) != 0 {
		t.Fatalf("broker_cpu %+v, warnings %q", c, res.Warnings)
	}
	if g := res.GeneratorCPU; g == nil || g.Processes != 2 || g.Cores != 0 || g.Seconds <= 0 {
		t.Fatalf("generator_cpu %+v: want the agents' sum", g)
	}
	if len(res.Agents) != 2 || res.Incomplete || res.Agents[0].TargetRate != 2000 || res.Agents[1].TargetRate != 1000 {
		t.Fatalf("agents %+v incomplete %v", res.Agents, res.Incomplete)
	}
	var acked int64
	var dirs []string
	for _, a := range res.Agents {
		acked += a.MessagesAcked
		dirs = append(dirs, filepath.Join(dir, a.Dir))
	}
	if acked == 0 || res.MessagesAcked != acked || res.AckLatencyMs.Count != acked {
		t.Errorf("merged acked %d (histogram %d), agents %d", res.MessagesAcked, res.AckLatencyMs.Count, acked)
	}
	ref, err := results.MergeDirs(io.Discard, io.Discard, filepath.Join(t.TempDir(), "m"), "m", dirs)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Result.AckLatencyMs != res.AckLatencyMs || ref.Result.MessagesSent != res.MessagesSent {
		t.Errorf("merged %+v, MergeDirs %+v", res.AckLatencyMs, ref.Result.AckLatencyMs)
	}
	for _, f := range []string{results.ResultFile, results.AckHgrmFile, results.HTMLFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestFleetAgentLost: an agent that goes away mid-run (its server closes
// every connection) is marked missing with a reason, the run is
// incomplete, its target share and streamed intervals stay, and the
// other agent's part is whole.
func TestFleetAgentLost(t *testing.T) {
	cfg, agents, stop2 := nullSinkFleet(t)
	cfg.Rate, cfg.Producers = 2000, 2
	cfg.Duration = 2 * time.Second
	// Lost after its first measured interval (cut at 1 s of run clock).
	time.AfterFunc(fleetStartLead+1600*time.Millisecond, stop2)
	var out lockedBuf
	run, err := runFleet(context.Background(), cfg, agents, "t", t.TempDir(), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	res := run.Result
	if !res.Incomplete || !strings.Contains(res.IncompleteReason, agents[1]) || len(res.Agents) != 2 {
		t.Fatalf("incomplete %v %q agents %+v\n%s", res.Incomplete, res.IncompleteReason, res.Agents, out.String())
	}
	lost, kept := res.Agents[1], res.Agents[0]
	if !lost.Missing || lost.MissingReason == "" || lost.TargetRate != 1000 || lost.MessagesAcked == 0 || kept.Missing {
		t.Errorf("lost %+v kept %+v", lost, kept)
	}
	if res.MessagesAcked != lost.MessagesAcked+kept.MessagesAcked || res.TargetRate != 2000 {
		t.Errorf("merged acked %d target %v, agents %d+%d", res.MessagesAcked, res.TargetRate, lost.MessagesAcked, kept.MessagesAcked)
	}
	if !strings.Contains(out.String(), "LOST") {
		t.Errorf("no LOST line:\n%s", out.String())
	}
}
