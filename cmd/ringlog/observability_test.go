package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/urfave/cli/v2"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/results"
)

// TestProfileBrokerCapturesWindow runs `ringlog loadgen --profile-broker`
// in process and checks that valid pprof profiles of the measured window
// land in --out, that perf's absence is reported (a perf binary that does
// not exist makes that path deterministic), and that `ringlog report`
// lists the top functions.
func TestProfileBrokerCapturesWindow(t *testing.T) {
	b := harness.StartBroker(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "run")
	var lgOut bytes.Buffer
	app := &cli.App{Commands: []*cli.Command{loadgenCommand()}, Writer: &lgOut, ErrWriter: &lgOut}
	err := app.Run([]string{"ringlog", "loadgen", "--bootstrap", b.Addr, "--broker-admin", b.Admin,
		"--topic", "obs-profile", "--partitions", "2", "--rate", "2000", "--message-size", "500",
		"--warmup", "1s", "--duration", "2s", "--consumers", "1", "--quiet", "--out", out,
		"--profile-broker", b.Admin, "--perf", "--perf-binary", filepath.Join(t.TempDir(), "no-perf")})
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
	b := harness.StartBroker(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "run")
	var lgOut bytes.Buffer
	app := &cli.App{Commands: []*cli.Command{loadgenCommand()}, Writer: &lgOut, ErrWriter: &lgOut}
	err := app.Run([]string{"ringlog", "loadgen", "--bootstrap", b.Addr, "--topic", "obs-perf", "--partitions", "2",
		"--rate", "2000", "--message-size", "500", "--warmup", "500ms", "--duration", "2s", "--quiet", "--out", out,
		"--profile-broker", b.Admin, "--perf"})
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
