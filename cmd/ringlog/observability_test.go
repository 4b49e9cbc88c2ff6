package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"

	"github.com/ringlog/ringlog/loadgen"
	"github.com/ringlog/ringlog/results"
)

// scrape reads /metrics, checks it parses as the Prometheus text format,
// and returns every sample by its series text, e.g.
// `ringlog_topic_bytes_in_total{topic="t"}`.
func scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s\n%s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("/metrics is not valid exposition text: %v", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sumSeries adds the samples of metric name whose labels contain every
// fragment (`topic="x"`); ok is false when there is none.
func sumSeries(m map[string]float64, name string, fragments ...string) (sum float64, ok bool) {
	for series, v := range m {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		match := true
		for _, f := range fragments {
			if !strings.Contains(series, f) {
				match = false
				break
			}
		}
		if match {
			sum += v
			ok = true
		}
	}
	return sum, ok
}

func obsLoadConfig(b *brokerProc, topic string) loadgen.Config {
	cfg := loadgen.DefaultConfig()
	cfg.Bootstrap = []string{b.addr}
	cfg.Topic = topic
	cfg.Partitions = 2
	cfg.Rate = 2000
	cfg.MessageSize = 500
	cfg.Warmup = time.Second
	cfg.Duration = 3 * time.Second
	cfg.Consumers = 1
	cfg.DrainTimeout = 10 * time.Second
	cfg.Quiet = true
	return cfg
}

// TestMetricsMoveUnderLoad scrapes /metrics before, during and after a
// short produce+consume load run and checks that the key series exist and
// move: request latency per API, per-topic produce and fetch, bytes,
// fsyncs and their latency, the ring's batching counters, connections.
func TestMetricsMoveUnderLoad(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "obs-metrics"
	before := scrape(t, b.admin)
	for _, name := range []string{"ringlog_io_path_info", "ringlog_fsyncs_total", "ringlog_offline_partitions",
		"ringlog_isr_shrinks_total", "ringlog_group_rebalances_total", "go_goroutines", "go_sched_latencies_seconds_count"} {
		if _, ok := sumSeries(before, name); !ok {
			t.Errorf("series %s missing before the run", name)
		}
	}

	cfg := obsLoadConfig(b, topic)
	type outcome struct {
		run *results.Run
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		run, err := loadgen.Run(context.Background(), cfg, io.Discard)
		done <- outcome{run, err}
	}()

	// While the run is on, its producer and consumer connections are open.
	var during map[string]float64
	deadline := time.Now().Add(cfg.Warmup + cfg.Duration)
	for {
		during = scrape(t, b.admin)
		if c, _ := sumSeries(during, "ringlog_connections"); c > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no open connection seen during the run")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var res outcome
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("load run did not end within a minute")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.run.Result
	if r.MessagesAcked == 0 || r.Errors != 0 {
		t.Fatalf("load run: acked %d, errors %d (%s)", r.MessagesAcked, r.Errors, r.FirstError)
	}
	var after map[string]float64
	grew := func(name string, fragments ...string) float64 {
		t.Helper()
		a, ok := sumSeries(after, name, fragments...)
		if !ok {
			t.Errorf("series %s%v missing after the run", name, fragments)
			return 0
		}
		bv, _ := sumSeries(before, name, fragments...)
		if a <= bv {
			t.Errorf("series %s%v did not grow: %v -> %v", name, fragments, bv, a)
		}
		return a - bv
	}
	// Two refused frames, each closing its connection: an absurd length
	// prefix and an API key nobody serves.
	unknownAPI := []byte{0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	for _, frame := range [][]byte{{0x7f, 0xff, 0xff, 0xff}, unknownAPI} {
		nc, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write(frame)
		io.Copy(io.Discard, nc) // until the broker closes it
		nc.Close()
	}
	after = scrape(t, b.admin)
	grew("ringlog_rejected_requests_total", `reason="frame_size"`)
	grew("ringlog_rejected_requests_total", `reason="unknown_api"`)

	grew("ringlog_request_duration_seconds_count", `api="Produce"`)
	grew("ringlog_request_duration_seconds_count", `api="Fetch"`)
	grew("ringlog_request_duration_seconds_bucket", `api="Produce"`, `le="+Inf"`)
	grew("ringlog_requests_total", `api="Produce"`)
	msgs := grew("ringlog_topic_messages_in_total", `topic="`+topic+`"`)
	if msgs < float64(r.MessagesAcked) {
		t.Errorf("topic messages in %v < %d acknowledged", msgs, r.MessagesAcked)
	}
	if in := grew("ringlog_topic_bytes_in_total", `topic="`+topic+`"`); in < float64(r.MessagesAcked)*float64(cfg.MessageSize) {
		t.Errorf("topic bytes in %v < %d messages of %d bytes", in, r.MessagesAcked, cfg.MessageSize)
	}
	grew("ringlog_topic_bytes_out_total", `topic="`+topic+`"`, `fetcher="consumer"`)
	grew("ringlog_topic_fetch_partitions_total", `topic="`+topic+`"`)
	grew("ringlog_bytes_in_total")
	grew("ringlog_bytes_out_total")
	grew("ringlog_fetch_bytes_total")
	grew("ringlog_appends_total")
	grew("ringlog_appended_bytes_total")
	if _, ok := sumSeries(after, "ringlog_journal_writes_total"); ok {
		// Under the journal a round's barrier is one journal write;
		// segments are fdatasynced by checkpoints, not every round.
		grew("ringlog_journal_writes_total")
		grew("ringlog_journal_records_total")
	} else {
		grew("ringlog_fsyncs_total")
	}
	grew("ringlog_fsync_duration_seconds_count")
	if _, ok := sumSeries(after, "ringlog_io_path_info", `path="uring"`); ok {
		grew("ringlog_ring_enters_total")
		grew("ringlog_ring_submissions_total")
		grew("ringlog_ring_completions_total")
		grew("ringlog_ring_submissions_per_enter_count")
	}
	if errs, _ := sumSeries(after, "ringlog_produce_errors_total"); errs != 0 {
		t.Errorf("produce errors counted in an error-free run: %v", errs)
	}
	if t.Failed() {
		t.Logf("broker output:\n%s", b.out.String())
	}
}

// TestProfileBrokerCapturesWindow runs `ringlog loadgen --profile-broker`
// in process and checks that valid pprof profiles of the measured window
// land in --out, that perf's absence is reported (a perf binary that does
// not exist makes that path deterministic), and that `ringlog report`
// lists the top functions.
func TestProfileBrokerCapturesWindow(t *testing.T) {
	b := startBroker(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "run")
	var lgOut bytes.Buffer
	app := &cli.App{Commands: []*cli.Command{loadgenCommand()}, Writer: &lgOut, ErrWriter: &lgOut}
	err := app.Run([]string{"ringlog", "loadgen", "--bootstrap", b.addr, "--broker-admin", b.admin,
		"--topic", "obs-profile", "--partitions", "2", "--rate", "2000", "--message-size", "500",
		"--warmup", "1s", "--duration", "2s", "--consumers", "1", "--quiet", "--out", out,
		"--profile-broker", b.admin, "--perf", "--perf-binary", filepath.Join(t.TempDir(), "no-perf")})
	if err != nil {
		t.Fatalf("loadgen: %v\n%s", err, lgOut.String())
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Profiles == nil || len(res.Profiles.Brokers) != 1 {
		t.Fatalf("result.json profiles: %+v\n%s", res.Profiles, lgOut.String())
	}
	bp := res.Profiles.Brokers[0]
	if bp.Error != "" {
		t.Fatalf("profiling window failed: %s", bp.Error)
	}

	cpu := parseProfile(t, filepath.Join(out, bp.Dir, results.CPUProfileFile))
	if st := cpu.SampleType; len(st) != 2 || st[1].Type != "cpu" || st[1].Unit != "nanoseconds" {
		t.Fatalf("cpu.pprof sample types %v", st)
	}
	// The window lasts the measured duration (2 s), not pprof's whole
	// seconds and not the warmup.
	if d := time.Duration(cpu.DurationNanos); d < 1900*time.Millisecond || d > time.Minute {
		t.Fatalf("cpu profile covers %v, want the 2 s window", d)
	}
	for _, name := range []string{"heap.pprof", "mutex.pprof", "block.pprof", "goroutine.pprof"} {
		parseProfile(t, filepath.Join(out, bp.Dir, name))
	}
	var win struct {
		Seconds  float64           `json:"seconds"`
		Counters map[string]uint64 `json:"counters"`
	}
	raw, err := os.ReadFile(filepath.Join(out, bp.Dir, results.ProfileWindowFile))
	if err == nil {
		err = json.Unmarshal(raw, &win)
	}
	if err != nil {
		t.Fatal(err)
	}
	if win.Counters["appended_bytes"] == 0 || bp.CPUSeconds() <= 0 {
		t.Fatalf("window saw no produce traffic or no CPU: %s", raw)
	}

	if bp.Perf == nil || bp.Perf.Status != "unavailable" || !strings.Contains(bp.Perf.Reason, "perf not found") {
		t.Fatalf("perf outcome %+v", bp.Perf)
	}
	if !strings.Contains(lgOut.String(), "perf UNAVAILABLE") {
		t.Fatalf("loadgen did not say that perf is unavailable:\n%s", lgOut.String())
	}

	var rep bytes.Buffer
	rapp := &cli.App{Commands: []*cli.Command{reportCommand()}, Writer: &rep}
	if err := rapp.Run([]string{"ringlog", "report", out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"top functions by CPU", "CPU s per GB produced", filepath.Join(out, bp.Dir, "cpu.pprof"), "perf: UNAVAILABLE"} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, rep.String())
		}
	}
	html, err := os.ReadFile(filepath.Join(out, results.HTMLFile))
	if err != nil || !bytes.Contains(html, []byte(`href="profiles/broker-1/cpu.pprof"`)) {
		t.Errorf("report.html does not link the CPU profile (%v)", err)
	}
}

// TestProfileBrokerPerf records the broker with the real perf when it
// works here; elsewhere it skips, saying why (the unavailable path is
// covered above).
func TestProfileBrokerPerf(t *testing.T) {
	b := startBroker(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "run")
	var lgOut bytes.Buffer
	app := &cli.App{Commands: []*cli.Command{loadgenCommand()}, Writer: &lgOut, ErrWriter: &lgOut}
	err := app.Run([]string{"ringlog", "loadgen", "--bootstrap", b.addr, "--topic", "obs-perf", "--partitions", "2",
		"--rate", "2000", "--message-size", "500", "--warmup", "500ms", "--duration", "2s", "--quiet", "--out", out,
		"--profile-broker", b.admin, "--perf"})
	if err != nil {
		t.Fatalf("loadgen: %v\n%s", err, lgOut.String())
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	perf := res.Profiles.Brokers[0].Perf
	switch {
	case perf == nil:
		t.Fatal("no perf outcome in result.json")
	case perf.Status == "unavailable":
		t.Skipf("perf cannot record here: %s", perf.Reason)
	case perf.Status != "captured":
		t.Fatalf("perf %s: %s", perf.Status, perf.Reason)
	}
	dir := filepath.Join(out, res.Profiles.Brokers[0].Dir)
	folded, err := os.ReadFile(filepath.Join(dir, results.PerfFoldedFile))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(strings.TrimSpace(string(folded)), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.Atoi(line[i+1:])
		if i <= 0 || err != nil || n <= 0 {
			t.Fatalf("bad folded line %q", line)
		}
		total += n
	}
	if total != perf.Samples {
		t.Fatalf("folded stacks hold %d samples, result.json says %d", total, perf.Samples)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, results.PerfFlameSVGFile)); err != nil || !bytes.HasPrefix(svg, []byte("<svg")) {
		t.Fatalf("flame graph: %v", err)
	}
}

func parseProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// TestPprofOffWithFlag: --pprof=false removes the profiling endpoints and
// keeps /metrics.
func TestPprofOffWithFlag(t *testing.T) {
	b := startBroker(t, t.TempDir(), "--pprof=false")
	c := http.Client{Timeout: 5 * time.Second}
	for path, want := range map[string]int{"/debug/pprof/": http.StatusNotFound, "/debug/ringlog/profile?seconds=1": http.StatusNotFound, "/metrics": http.StatusOK} {
		resp, err := c.Get("http://" + b.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %s, want %d", path, resp.Status, want)
		}
	}
}

// TestProfilingEndpointGuards covers the window endpoint without a
// broker: loopback only, bad arguments, one window at a time.
func TestProfilingEndpointGuards(t *testing.T) {
	pw := &profileWindows{}
	h := loopbackOnly(pw)

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/debug/ringlog/profile?seconds=1", nil)
	req.RemoteAddr = "192.0.2.7:4000"
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("remote client: %d", rec.Code)
	}
	for _, q := range []string{"seconds=0", "seconds=abc", "seconds=7200", "seconds=1&mutex_fraction=-1", "seconds=1&block_rate=fast"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/debug/ringlog/profile?"+q, nil)
		req.RemoteAddr = "127.0.0.1:4000"
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, rec.Code)
		}
	}

	// Two windows at once: one runs, the other is refused.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", fmt.Sprintf("/debug/ringlog/profile?seconds=%s", "0.5"), nil)
			req.RemoteAddr = "[::1]:4000"
			h.ServeHTTP(rec, req)
			codes[i] = rec.Code
		}()
	}
	wg.Wait()
	if !(codes[0] == http.StatusOK && codes[1] == http.StatusConflict || codes[0] == http.StatusConflict && codes[1] == http.StatusOK) {
		t.Fatalf("concurrent windows answered %v, want one 200 and one 409", codes)
	}
}

// TestReplicationMetrics checks the replication series on a 3-node
// cluster: the leader reports its partition and each follower's lag; a
// paused follower drops out of the ISR (shrink counted, partition under
// replicated) and is counted back in (expand) once it resumes. The
// per-partition series follow: log end, high watermark and log start on
// every replica, ISR size and the under-replicated flags on the leader,
// and the acks=all produce held while the paused follower is still in the
// ISR shows in ringlog_produce_oldest_wait_seconds until the ISR shrinks.
func TestReplicationMetrics(t *testing.T) {
	c := startReplCluster(t, 3)
	adm := kadm.NewClient(c.node(1).client(t, kgo.SeedBrokers(c.addrs()...)))
	const topic = "obs-repl"
	resp, err := adm.CreateTopic(testContext(t, 30*time.Second), 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	md := waitMetadata(t, adm, 20*time.Second, "leader and full ISR", func(m kadm.Metadata) bool {
		ps := m.Topics[topic].Partitions
		return len(ps) == 1 && ps[0].Leader >= 0 && len(ps[0].ISR) == 3
	})
	leaderID := md.Topics[topic].Partitions[0].Leader
	leader := c.node(leaderID)
	// Log lines about a partition name topic, partition and leader epoch.
	logDeadline := time.Now().Add(10 * time.Second)
	for !hasLogLine(leader.out.String(), `msg="leading partition"`, "topic="+topic, "partition=0", "leader_epoch=") {
		if time.Now().After(logDeadline) {
			t.Fatalf("no 'leading partition' line with topic, partition and leader_epoch:\n%s", leader.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl := c.node(1).client(t, kgo.SeedBrokers(c.addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(time.Millisecond))
	produce := func(n int) {
		t.Helper()
		ctx := testContext(t, 30*time.Second)
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(20)

	// waitFor polls the leader's /metrics until ok accepts them.
	waitFor := func(what string, ok func(m map[string]float64) bool) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			m := scrape(t, leader.admin)
			if ok(m) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("leader %d: %s not seen in 30 s", leaderID, what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var followers []int32
	for id := int32(1); id <= 3; id++ {
		if id != leaderID {
			followers = append(followers, id)
		}
	}
	m := waitFor("both followers' lag", func(m map[string]float64) bool {
		for _, f := range followers {
			if _, ok := sumSeries(m, "ringlog_follower_lag_offsets", `topic="`+topic+`"`, fmt.Sprintf(`follower="%d"`, f), `in_isr="true"`); !ok {
				return false
			}
		}
		return true
	})
	if led, _ := sumSeries(m, "ringlog_replicated_partitions_led"); led < 1 {
		t.Fatalf("leader reports %v led partitions", led)
	}
	if under, ok := sumSeries(m, "ringlog_under_replicated_partitions"); !ok || under != 0 {
		t.Fatalf("under-replicated %v with a full ISR", under)
	}
	shrinks0, _ := sumSeries(m, "ringlog_isr_shrinks_total")
	expands0, _ := sumSeries(m, "ringlog_isr_expands_total")
	part := []string{`topic="` + topic + `"`, `partition="0"`}
	// partSeries reads one per-partition series of topic-0, or a
	// per-broker one (-1: absent).
	partSeries := func(m map[string]float64, name string) float64 {
		fragments := part
		if name == "ringlog_produce_oldest_wait_seconds" {
			fragments = nil // per broker
		}
		v, ok := sumSeries(m, name, fragments...)
		if !ok {
			return -1
		}
		return v
	}
	for _, want := range []struct {
		name string
		v    float64
	}{{"ringlog_partition_log_end_offset", 20}, {"ringlog_partition_high_watermark", 20}, {"ringlog_partition_log_start_offset", 0},
		{"ringlog_partition_isr_size", 3}, {"ringlog_partition_under_replicated", 0}, {"ringlog_partition_under_min_isr", 0},
		{"ringlog_produce_oldest_wait_seconds", 0}} {
		if got := partSeries(m, want.name); got != want.v {
			t.Errorf("leader: %s = %v, want %v", want.name, got, want.v)
		}
	}
	for _, f := range followers {
		fm := scrape(t, c.node(f).admin)
		if got := partSeries(fm, "ringlog_partition_log_end_offset"); got != 20 {
			t.Errorf("follower %d: log end offset %v, want 20", f, got)
		}
		if got := partSeries(fm, "ringlog_partition_isr_size"); got != -1 {
			t.Errorf("follower %d reports an ISR size (%v) for a partition it does not lead", f, got)
		}
	}

	// Pause a follower that is not the controller: only the ISR changes.
	ctrl := c.controller(20 * time.Second)
	paused := followers[0]
	if paused == ctrl {
		paused = followers[1]
	}
	p := c.node(paused)
	p.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGCONT) })
	// The first acks=all produce waits for the paused ISR member until it
	// is dropped (replica lag 3 s): the oldest wait shows it meanwhile.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		ctx := testContext(t, 30*time.Second)
		for i := range 20 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("w%d", i))}).FirstErr(); err != nil {
				t.Errorf("produce with a paused follower: %v", err)
				return
			}
		}
	}()
	waitFor("a produce waiting on the paused follower", func(m map[string]float64) bool {
		return partSeries(m, "ringlog_produce_oldest_wait_seconds") >= 0.5
	})
	<-produced
	m = waitFor("an ISR shrink", func(m map[string]float64) bool {
		s, _ := sumSeries(m, "ringlog_isr_shrinks_total")
		u, _ := sumSeries(m, "ringlog_under_replicated_partitions")
		return s > shrinks0 && u >= 1
	})
	for _, want := range []struct {
		name string
		v    float64
	}{{"ringlog_partition_log_end_offset", 40}, {"ringlog_partition_high_watermark", 40},
		{"ringlog_partition_isr_size", 2}, {"ringlog_partition_under_replicated", 1}, {"ringlog_partition_under_min_isr", 0},
		{"ringlog_produce_oldest_wait_seconds", 0}} {
		if got := partSeries(m, want.name); got != want.v {
			t.Errorf("leader with a follower out of the ISR: %s = %v, want %v", want.name, got, want.v)
		}
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	produce(5)
	waitFor("an ISR expand", func(m map[string]float64) bool {
		e, _ := sumSeries(m, "ringlog_isr_expands_total")
		u, _ := sumSeries(m, "ringlog_under_replicated_partitions")
		return e > expands0 && u == 0 && partSeries(m, "ringlog_partition_isr_size") == 3 &&
			partSeries(m, "ringlog_partition_under_replicated") == 0 && partSeries(m, "ringlog_partition_high_watermark") == 45
	})

	// A new topic is picked up by followers at once: those already
	// long-polling a leader of one of its partitions (every node leads
	// one of three, and all follow the rest) cancel the poll and send a
	// fetch carrying it, instead of waiting out the 500 ms poll.
	const fresh = "obs-repl-new"
	interrupts := func() float64 {
		sum := 0.0
		for _, b := range c.nodes {
			v, _ := sumSeries(scrape(t, b.admin), "ringlog_replica_fetch_interrupts_total")
			sum += v
		}
		return sum
	}
	before := interrupts()
	createRF3Topic(t, adm, fresh, 3)
	manual := c.node(1).client(t, kgo.SeedBrokers(c.addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		start := time.Now()
		if err := manual.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Topic: fresh, Partition: p, Value: []byte("first")}).FirstErr(); err != nil {
			t.Fatalf("first acks=all produce to %s-%d: %v", fresh, p, err)
		}
		t.Logf("first acks=all produce to %s-%d acknowledged in %v", fresh, p, time.Since(start))
	}
	if after := interrupts(); after <= before {
		t.Errorf("replica fetch interrupts %v -> %v: no follower cut its long poll for the new partitions", before, after)
	}
}

// hasLogLine reports whether one line of a text log holds every part.
func hasLogLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
