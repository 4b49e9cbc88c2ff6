package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ringlog/ringlog/results"
)

// The controller side of a distributed run (`ringlog loadgen --agents`):
// split the workload, start every agent at one instant, print the fleet's
// progress from the streamed intervals, then write each agent's part under
// OUT/agents/<name>/ and merge the parts with results.Merge, as `ringlog
// report merge` would.

// fleetStartLead is how far ahead of now the common start is: time for
// every agent to receive its config, look up the topic and open its
// connections. A variable so unit tests can shorten it.
var fleetStartLead = 3 * time.Second

const (
	// agentSilence is how long an agent may say nothing (it sends at least
	// a heartbeat a second) before the controller gives it up as lost.
	agentSilence = 5 * time.Second
	// helloTimeout bounds the reachability check before the run.
	helloTimeout = 5 * time.Second
)

// ErrIncomplete is what a distributed run returns, after writing its merged
// result, when an agent was lost: the result covers only part of the
// planned load.
var ErrIncomplete = errors.New("INCOMPLETE: an agent was lost; the merged result lacks its share after that moment (see incomplete_reason)")

// agentShare is one agent's part of the workload.
type agentShare struct {
	Rate      float64
	Producers int
}

// splitLoad divides producers over n agents (the first ones get the
// remainder; every agent at least one, so fewer producers than agents is
// raised to n) and the rate in proportion to producers, so every producer
// of the fleet runs at the same rate and the shares add up to rate.
func splitLoad(rate float64, producers, n int) []agentShare {
	total := max(producers, n)
	shares := make([]agentShare, n)
	for i := range shares {
		p := total / n
		if i < total%n {
			p++
		}
		shares[i] = agentShare{Producers: p, Rate: rate * float64(p) / float64(total)}
	}
	return shares
}

// agentDirName is an agent's directory under OUT/agents: its address with
// the characters a path should not hold replaced.
func agentDirName(addr string) string {
	r := strings.NewReplacer(":", "_", "/", "_", "\\", "_", "[", "", "]", "")
	return r.Replace(addr)
}

// agentClient talks to one agent.
type agentClient struct {
	name  string // the address as given
	url   string
	token string
	hc    *http.Client
	hello agentHello
}

func newAgentClient(addr, token string) (*agentClient, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--agents %q: want host:port (%v)", addr, err)
	}
	// No overall client timeout: a run's stream lasts the whole run; the
	// controller's silence check and contexts bound it instead.
	tr := &http.Transport{
		DialContext:            (&net.Dialer{Timeout: helloTimeout}).DialContext,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &agentClient{name: addr, url: "http://" + addr, token: token, hc: &http.Client{Transport: tr}}, nil
}

func (a *agentClient) request(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp, nil
}

// sayHello checks the agent is reachable, takes the token and is idle.
func (a *agentClient) sayHello(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	resp, err := a.request(ctx, http.MethodGet, agentPathHello, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&a.hello); err != nil {
		return fmt.Errorf("bad hello: %w", err)
	}
	return nil
}

// readAgentStream reads JSON lines of at most limit bytes from r into
// msgs until EOF or a bad line.
func readAgentStream(r io.Reader, limit int, msgs func(agentMsg)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, limit)
		if len(line) > 0 {
			var m agentMsg
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				return fmt.Errorf("bad message from agent: %v", jerr)
			}
			msgs(m)
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// limit is an error, read no further.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > limit+1 {
			return nil, fmt.Errorf("agent message longer than %d bytes", limit)
		}
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\n"), err
	}
}

// fleetAgent is the controller's record of one agent during the run.
type fleetAgent struct {
	c     *agentClient
	share agentShare
	// Filled as messages arrive (under fleet.mu).
	ack, send, e2e []*hdr.Histogram
	last           intervalReport
	prev           intervalReport
	lastHeard      time.Time
	result         *results.Result
	intervalCount  int
	done           bool
	missing        string // why and when it was lost ("" not lost)
	// interrupted: the controller was interrupted before a's result came.
	interrupted bool
	cancel      context.CancelFunc
}

// fleet is a distributed run in progress.
type fleet struct {
	cfg     Config
	agents  []*fleetAgent
	startAt time.Time
	mu      sync.Mutex
	out     io.Writer
	// topicCreated: this run created the topic (a sweep deletes only
	// those; recorded in the workload as Run does).
	topicCreated bool
	// counters reads the brokers this controller knows (bench's, or
	// --broker-pid/--broker-admin) over the window; the agents read
	// only themselves.
	counters *counterWindow
}

// Fleet options are checked here (once, for all agents) rather than by
// each agent.
func validateFleet(o Options) error {
	switch {
	case o.FindMax, len(o.Sweep) > 1, o.NullSink, len(o.Config.ProfileBrokers) > 0:
		return errors.New("--agents runs one fixed-rate workload: it does not combine with --find-max, a partition sweep, --null-sink or --profile-broker")
	case !o.Config.StartAt.IsZero():
		return errors.New("--agents picks the common start itself: drop --start-at")
	case o.AgentToken == "":
		return errors.New("--agents needs --agent-token (or RINGLOG_AGENT_TOKEN), the token the agents were started with")
	}
	seen := map[string]bool{}
	for _, a := range o.Agents {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--agents %q: want host:port", a)
		}
		if seen[a] {
			return fmt.Errorf("--agents lists %s twice", a)
		}
		seen[a] = true
	}
	return nil
}

// runFleet runs cfg split over the agents and writes the merged result to
// dir (required: the agents' parts are kept under it).
func runFleet(ctx context.Context, cfg Config, agents []string, token, dir string, out io.Writer) (*results.Run, error) {
	f := &fleet{cfg: cfg, out: out}
	shares := splitLoad(cfg.Rate, cfg.Producers, len(agents))
	if n := len(agents); cfg.Producers < n {
		fmt.Fprintf(out, "fleet: --producers %d raised to %d, one per agent\n", cfg.Producers, n)
		f.cfg.Producers = n
	}
	for i, addr := range agents {
		c, err := newAgentClient(addr, token)
		if err != nil {
			return nil, &UsageError{err}
		}
		f.agents = append(f.agents, &fleetAgent{c: c, share: shares[i]})
	}
	// Every agent must answer before anything starts.
	var wg sync.WaitGroup
	errs := make([]error, len(f.agents))
	for i, a := range f.agents {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = a.c.sayHello(ctx) }()
	}
	wg.Wait()
	var bad []string
	for i, err := range errs {
		if err != nil {
			bad = append(bad, fmt.Sprintf("agent %s: %v", f.agents[i].c.name, err))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("run not started: %s", strings.Join(bad, "; "))
	}
	sources, _, err := counterSources(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// The topic is created once, here, so agents do not race to create it.
	info, err := prepareTopic(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// The merged workload describes the topic as it is (as Run does).
	f.cfg.Partitions = int32(len(info.leaders))
	if info.replicas > 0 {
		f.cfg.ReplicationFactor = int16(info.replicas)
	}
	if !info.created {
		f.cfg.TopicConfigs = nil
	}
	f.cfg.clusterBrokers = info.brokers
	f.cfg.Keys = resolveKeys(f.cfg.Keys, f.cfg.Partitions)
	f.topicCreated = info.created
	for i, a := range f.agents {
		fmt.Fprintf(out, "agent %d/%d %s (%s, %d cores): %.0f msg/s, %d producers\n", i+1, len(f.agents), a.c.name, a.c.hello.Hostname, a.c.hello.Cores, a.share.Rate, a.share.Producers)
	}
	f.startAt = time.Now().Add(fleetStartLead)
	fmt.Fprintf(out, "fleet: %d agents start at %s (warmup %v, measured %v)\n", len(f.agents), f.startAt.Format(time.RFC3339Nano), cfg.Warmup, cfg.Duration)
	// The generator is the agents, wherever they run: the brokers are not
	// known to share its machine (no contention check).
	f.counters = startCounterWindow(ctx, sources, false, f.startAt.Add(cfg.Warmup), cfg.Duration)

	// Send every agent its share; one that refuses cancels them all.
	streams := make([]io.ReadCloser, len(f.agents))
	for i, a := range f.agents {
		actx, cancel := context.WithCancel(ctx)
		a.cancel = cancel
		acfg := cfg
		acfg.Rate, acfg.Producers, acfg.StartAt = a.share.Rate, a.share.Producers, f.startAt
		acfg.BrokerPIDs, acfg.CounterAdmins = nil, nil // read here, once
		acfg.Label = a.c.name
		body, err := json.Marshal(agentRunRequest{Name: a.c.name, Config: acfg})
		if err == nil {
			var resp *http.Response
			if resp, err = a.c.request(actx, http.MethodPost, agentPathRun, body); err == nil {
				streams[i] = resp.Body
			}
		}
		if err != nil {
			for j, b := range f.agents[:i+1] {
				b.cancel()
				if streams[j] != nil {
					streams[j].Close()
				}
			}
			return nil, fmt.Errorf("run not started: agent %s refused the run: %v", a.c.name, err)
		}
	}
	now := time.Now()
	for _, a := range f.agents {
		a.lastHeard = now
	}
	var readers sync.WaitGroup
	for i, a := range f.agents {
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer streams[i].Close()
			err := readAgentStream(streams[i], agentMaxLine, func(m agentMsg) { f.receive(a, m) })
			f.mu.Lock()
			defer f.mu.Unlock()
			if !a.done {
				if err == nil || errors.Is(err, io.EOF) {
					err = errors.New("stream ended without a result")
				}
				f.lose(a, fmt.Sprintf("connection lost: %v", err))
			}
		}()
	}
	f.watch(ctx)
	for _, a := range f.agents {
		a.cancel()
	}
	readers.Wait()
	return f.merge(dir)
}

// receive records one message of agent a.
func (f *fleet) receive(a *fleetAgent, m agentMsg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.done {
		return
	}
	a.lastHeard = time.Now()
	switch m.Type {
	case msgInterval:
		if m.Interval == nil {
			return
		}
		ir := *m.Interval
		ack, send, e2e, err := ir.histograms()
		if err != nil {
			f.lose(a, err.Error())
			return
		}
		if ack != nil {
			// Memory stays bounded whatever an agent sends: a run has
			// one interval a second, a few more at the edges.
			if limit := int((f.cfg.Warmup+f.cfg.Duration+f.cfg.DrainTimeout)/time.Second) + 60; len(a.ack) >= limit {
				f.lose(a, fmt.Sprintf("agent sent more than %d intervals", limit))
				return
			}
			a.ack = append(a.ack, ack)
			if send != nil {
				a.send = append(a.send, send)
			}
			if e2e != nil {
				a.e2e = append(a.e2e, e2e)
			}
		}
		a.prev, a.last = a.last, ir
	case msgResult:
		if m.Result == nil {
			f.lose(a, "result message without a result")
			return
		}
		if m.IntervalCount != len(a.ack) {
			f.lose(a, fmt.Sprintf("agent reported %d intervals, %d arrived", m.IntervalCount, len(a.ack)))
			return
		}
		a.result, a.done = m.Result, true
	case msgError:
		f.lose(a, "agent failed: "+m.Error)
	}
}

// lose marks a as missing. Lock held.
func (f *fleet) lose(a *fleetAgent, why string) {
	if a.done {
		return
	}
	a.done = true
	at := time.Now()
	a.missing = fmt.Sprintf("%s at %s (%.1fs into the run)", why, at.UTC().Format(time.RFC3339), at.Sub(f.startAt).Seconds())
	if a.cancel != nil {
		a.cancel()
	}
	fmt.Fprintf(f.out, "fleet: agent %s LOST: %s; continuing with the others\n", a.c.name, a.missing)
}

// watch prints the fleet's progress once a second until every agent has
// finished or been lost, and gives up agents that fall silent.
func (f *fleet) watch(ctx context.Context) {
	// Aligned half a second after the agents' interval ticks so most of
	// them have reported the second.
	next := f.startAt.Add(1500 * time.Millisecond)
	deadline := f.startAt.Add(f.cfg.Warmup + f.cfg.Duration + f.cfg.DrainTimeout + 30*time.Second)
	// Checked often so the run ends as soon as the last agent does.
	check := time.NewTicker(50 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			// Interrupted: ending the requests (their contexts derive
			// from ctx) interrupts the agents' runs; what they streamed
			// until now is the result.
			f.mu.Lock()
			for _, a := range f.agents {
				if !a.done {
					a.done, a.interrupted = true, true
				}
			}
			f.mu.Unlock()
			return
		case <-check.C:
		}
		f.mu.Lock()
		now := time.Now()
		all := true
		for _, a := range f.agents {
			if !a.done && now.Sub(a.lastHeard) > agentSilence {
				f.lose(a, fmt.Sprintf("no report for %v", now.Sub(a.lastHeard).Round(time.Second)))
			}
			if !a.done && now.After(deadline) {
				f.lose(a, "no result by the run's deadline")
			}
			all = all && a.done
		}
		if !all && !now.Before(next) {
			f.progress(now)
			for !now.Before(next) {
				next = next.Add(time.Second)
			}
		}
		f.mu.Unlock()
		if all {
			return
		}
	}
}

// progress prints one line for the fleet: acked rate summed over the
// agents' latest intervals, the merged p50/p99 of those intervals, how
// many agents reported within the last two seconds and which are behind
// (send delay p99 over sendDelaySaturatedMs) or lost. Lock held.
func (f *fleet) progress(now time.Time) {
	var rate float64
	merged := results.NewHistogram()
	reporting, warm := 0, false
	var behind, lost []string
	for _, a := range f.agents {
		if a.missing != "" {
			lost = append(lost, a.c.name)
			continue
		}
		if now.Sub(a.lastHeard) > 2*time.Second || a.last.AtS == 0 {
			continue
		}
		reporting++
		warm = warm || a.last.Warmup
		if dt := a.last.AtS - a.prev.AtS; dt > 0 {
			rate += float64(a.last.Acked-a.prev.Acked) / dt
		}
		if !a.last.Warmup && len(a.ack) > 0 {
			merged.Merge(a.ack[len(a.ack)-1])
			if len(a.send) > 0 {
				if sd := float64(a.send[len(a.send)-1].ValueAtQuantile(99)) / 1000; sd > sendDelaySaturatedMs {
					behind = append(behind, fmt.Sprintf("%s (send-delay p99 %.1f ms)", a.c.name, sd))
				}
			}
		}
	}
	lat := "-"
	if merged.TotalCount() > 0 {
		lat = fmt.Sprintf("p50 %.2f p99 %.2f ms", float64(merged.ValueAtQuantile(50))/1000, float64(merged.ValueAtQuantile(99))/1000)
	}
	phase := ""
	if warm {
		phase = "  [warmup]"
	}
	extra := ""
	if len(behind) > 0 {
		extra += "  behind: " + strings.Join(behind, ", ")
	}
	if len(lost) > 0 {
		extra += "  LOST: " + strings.Join(lost, ", ")
	}
	fmt.Fprintf(f.out, "fleet %6.1fs of %.0fs  %8.0f msg/s acked  %s (this second, merged)  agents reporting %d/%d%s%s\n",
		now.Sub(f.startAt).Seconds(), (f.cfg.Warmup + f.cfg.Duration).Seconds(), rate, lat, reporting, len(f.agents), extra, phase)
}

// partRun is agent a's part as a result directory's contents: its own
// result with the streamed histograms, or for a lost agent what it
// streamed before it was lost.
func (f *fleet) partRun(a *fleetAgent) *results.Run {
	run := &results.Run{Ack: a.ack, SendDelay: a.send, E2E: a.e2e}
	if a.result != nil {
		// Finalize recomputes the percentiles from the streamed
		// intervals; counters and rates stay the agent's.
		run.Result = *a.result
		run.Finalize()
		return run
	}
	cfg := f.cfg
	cfg.Rate, cfg.Producers = a.share.Rate, a.share.Producers
	measured := max(0, a.last.AtS-cfg.Warmup.Seconds())
	res := results.Result{
		Label: a.c.name, StartedAt: f.startAt.Add(cfg.Warmup), DurationS: measured, WarmupS: cfg.Warmup.Seconds(),
		TargetRate: a.share.Rate, MessageSize: cfg.MessageSize,
		MessagesSent: a.last.MeasuredSent, Errors: a.last.Errors,
		SLA: results.SLA{TargetP99Ms: float64(cfg.TargetP99) / 1e6}, Workload: cfg.workload(),
	}
	if a.interrupted {
		res.Interrupted = true
	} else {
		res.Incomplete, res.IncompleteReason = true, "agent "+a.c.name+" lost: "+a.missing
	}
	if len(a.ack) > 0 {
		res.StartedAt = time.UnixMilli(a.ack[0].StartTimeMs())
	}
	// Acked is what the streamed histograms hold: the counter read after
	// the last cut may include acks whose latencies were never streamed.
	for _, h := range a.ack {
		res.MessagesAcked += h.TotalCount()
	}
	// A lost agent's rate is over the planned window, not the part it
	// lived through: the merged achieved rate (a sum) then shows the
	// share that is missing instead of crediting it.
	window := measured
	if !a.interrupted {
		window = max(measured, cfg.Duration.Seconds())
	}
	if window > 0 {
		res.AchievedRate = float64(res.MessagesAcked) / window
		res.ThroughputMBps = res.AchievedRate * float64(cfg.MessageSize) / 1e6
	}
	res.Environment = results.Environment{Hostname: a.c.hello.Hostname, Cores: a.c.hello.Cores}
	run.Result = res
	run.Finalize()
	return run
}

// merge writes every agent's part to dir/agents/<name>, loads them back
// (exactly what `ringlog report merge` reads) and merges them into dir.
func (f *fleet) merge(dir string) (*results.Run, error) {
	var parts []*results.Run
	var agents []results.AgentResult
	var lost []string
	hosts := map[string]int{}
	for _, a := range f.agents {
		sub := filepath.Join("agents", agentDirName(a.c.name))
		part := f.partRun(a)
		if err := part.Write(filepath.Join(dir, sub)); err != nil {
			return nil, err
		}
		loaded, err := results.Load(filepath.Join(dir, sub))
		if err != nil {
			return nil, err
		}
		parts = append(parts, loaded)
		r := loaded.Result
		ar := results.AgentResult{
			Name: a.c.name, Hostname: a.c.hello.Hostname, Cores: a.c.hello.Cores, Dir: sub,
			TargetRate: a.share.Rate, AchievedRate: r.AchievedRate, MessagesSent: r.MessagesSent,
			MessagesAcked: r.MessagesAcked, Errors: r.Errors, AckLatencyMs: r.AckLatencyMs,
			Saturated: r.GeneratorSaturated, SaturationReason: r.SaturationReason,
		}
		if a.missing != "" {
			ar.Missing, ar.MissingReason = true, a.missing
			lost = append(lost, fmt.Sprintf("agent %s (target %.0f msg/s): %s", a.c.name, a.share.Rate, a.missing))
		}
		agents = append(agents, ar)
		if h := a.c.hello.Hostname; h != "" {
			hosts[h] = a.c.hello.Cores
		} else {
			hosts[a.c.name] = a.c.hello.Cores
		}
	}
	merged, err := results.Merge(parts)
	if err != nil {
		return nil, err
	}
	res := &merged.Result
	res.Label = f.cfg.Label
	if res.Label == "" {
		res.Label = fmt.Sprintf("%d agents", len(f.agents))
	}
	res.Workload = f.cfg.workload()
	res.Workload["topic_created"] = strconv.FormatBool(f.topicCreated)
	res.Workload["agents"] = strconv.Itoa(len(f.agents))
	res.Agents = agents
	if len(lost) > 0 {
		res.Incomplete = true
		res.IncompleteReason = "lost " + strings.Join(lost, "; ")
		// The latency of part of the load is not known: no pass.
		res.SLA.Pass = false
	}
	var saturated []string
	for _, ar := range agents {
		if ar.Saturated {
			saturated = append(saturated, fmt.Sprintf("agent %s: %s", ar.Name, ar.SaturationReason))
		}
	}
	if len(saturated) > 0 {
		// Merge names parts by directory; name them by agent instead.
		res.SaturationReason = strings.Join(saturated, "; ")
	}
	res.Environment = Environment(f.cfg.BrokerAdmin, f.cfg.Client)
	res.Environment.Hostname, res.Environment.Cores, res.Environment.CPUModel = "", 0, ""
	// Environment counts this host as the one client; the agents are.
	res.Environment.ClientHosts, res.Environment.ClientCPUs = len(hosts), 0
	for _, c := range hosts {
		res.Environment.ClientCPUs += c
	}
	// What the run was measured against, from the topic as it is.
	env := &res.Environment
	env.ReplicationFactor, env.Partitions = int(f.cfg.ReplicationFactor), int(f.cfg.Partitions)
	env.Acks, env.Compression = acksName(f.cfg.Acks), f.cfg.Compression.String()
	if v, err := strconv.Atoi(f.cfg.TopicConfigs["min.insync.replicas"]); err == nil {
		env.MinISR = v
	}
	// The generators' CPU is the agents' (Merge summed it); this
	// process's own is not the load's.
	if f.counters != nil {
		var warns []string
		res.BrokerCPU, _, warns = f.counters.result(res.MessagesAcked, res.MessagesAcked*int64(f.cfg.MessageSize))
		res.Warnings = append(res.Warnings, warns...)
	}
	if err := merged.Write(dir); err != nil {
		return nil, err
	}
	return merged, nil
}

// finishFleet prints the merged summary (with its per-agent table). An
// incomplete run prints an INCOMPLETE verdict and returns ErrIncomplete
// (exit status 1); an interrupted one returns ErrInterrupted.
func finishFleet(run *results.Run, dir string, out io.Writer) error {
	results.WriteSummary(out, &run.Result)
	fmt.Fprintf(out, "report: %s (agents' parts under %s)\n", dir, filepath.Join(dir, "agents"))
	switch {
	case run.Result.Incomplete:
		fmt.Fprintf(out, "INCOMPLETE: %s\n", run.Result.IncompleteReason)
		return ErrIncomplete
	case run.Result.Interrupted:
		return ErrInterrupted
	}
	return nil
}
