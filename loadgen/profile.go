package loadgen

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/results"
)

// Profiling runs (--profile-broker): for every named broker admin address
// the generator asks the broker for a profiling window
// (/debug/ringlog/profile, broker/serveflags/profile.go) that starts when
// the measured window starts and lasts exactly as long, so the CPU
// profile explains the latency report it sits next to. With --perf it
// also runs `perf record -g` on each broker's process for the window.
// Everything lands under the run's --out directory in profiles/broker-N/.

// profileTarget is one broker being profiled.
type profileTarget struct {
	base  string // admin URL without a path
	prof  results.BrokerProfile
	files map[string][]byte // relative to the result dir
	// perfWhyNot is why perf cannot record this broker ("" when it can).
	perfWhyNot string
}

// profiler captures the profiling windows of a run.
type profiler struct {
	cfg     Config
	out     io.Writer
	targets []*profileTarget
	wg      sync.WaitGroup
	start   time.Time
}

// adminURL turns host:port or a URL into the admin base URL.
func adminURL(admin string) (string, error) {
	s := admin
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--profile-broker %q: want host:port or http://host:port", admin)
	}
	return u.Scheme + "://" + u.Host, nil
}

// newProfiler checks every broker before the run starts: its /healthz
// names node id and pid, and perf's availability is probed now, not
// inside the window.
func newProfiler(cfg Config, out io.Writer) (*profiler, error) {
	p := &profiler{cfg: cfg, out: out}
	dirs := map[string]bool{}
	for _, admin := range cfg.ProfileBrokers {
		base, err := adminURL(admin)
		if err != nil {
			return nil, err
		}
		h, err := fetchHealth(base)
		if err != nil {
			return nil, fmt.Errorf("--profile-broker %s: %w", admin, err)
		}
		dir := fmt.Sprintf("profiles/broker-%d", h.NodeID)
		for i := 2; dirs[dir]; i++ {
			dir = fmt.Sprintf("profiles/broker-%d-%d", h.NodeID, i)
		}
		dirs[dir] = true
		t := &profileTarget{base: base, files: map[string][]byte{},
			prof: results.BrokerProfile{Admin: admin, NodeID: h.NodeID, PID: h.PID, Dir: dir}}
		if cfg.Perf {
			t.perfWhyNot = perfUnavailable(cfg.PerfBinary, h.PID)
			if t.perfWhyNot != "" {
				fmt.Fprintf(out, "profile: perf UNAVAILABLE for broker %d: %s\n", h.NodeID, t.perfWhyNot)
			}
		}
		p.targets = append(p.targets, t)
	}
	return p, nil
}

type healthDoc struct {
	NodeID int32 `json:"node_id"`
	PID    int   `json:"pid"`
}

func fetchHealth(base string) (healthDoc, error) {
	var h healthDoc
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(base + "/healthz")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("/healthz: %s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// run captures every target's window [start, start+d) in the background.
func (p *profiler) run(ctx context.Context, start time.Time, d time.Duration) {
	p.start = start
	for _, t := range p.targets {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.capture(ctx, t, start, d)
		}()
	}
}

// perfLead is how long before the window perf starts: attaching takes
// it a good fraction of a second, and samples outside the window are
// dropped by timestamp anyway.
const perfLead = 2 * time.Second

func (p *profiler) capture(ctx context.Context, t *profileTarget, start time.Time, d time.Duration) {
	var rec *perfRecording
	if p.cfg.Perf {
		t.prof.Perf = &results.Perf{Status: "unavailable", Reason: t.perfWhyNot}
		if t.perfWhyNot == "" && sleepUntil(ctx, start.Add(-perfLead)) {
			tmp, err := os.CreateTemp("", "ringlog-perf-*.data")
			if err == nil {
				tmp.Close()
				defer os.Remove(tmp.Name())
				rec, err = startPerf(p.cfg.PerfBinary, t.prof.PID, p.cfg.PerfFreq, tmp.Name())
			}
			if err != nil {
				t.prof.Perf = &results.Perf{Status: "failed", Reason: "starting perf record: " + err.Error()}
			}
		}
	}
	if !sleepUntil(ctx, start) {
		t.prof.Error = ctx.Err().Error()
	} else if err := p.window(ctx, t, d); err != nil {
		t.prof.Error = err.Error()
		fmt.Fprintf(p.out, "profile: broker %d: %v\n", t.prof.NodeID, err)
	}
	if rec != nil {
		// The window request returns once the broker's window ended; if
		// it failed early, perf still stops on time. The margin lets perf
		// write the window's last samples before it is stopped.
		sleepUntil(ctx, start.Add(d+200*time.Millisecond))
		p.finishPerf(t, rec, monotonicSeconds(start), monotonicSeconds(start.Add(d)))
	}
}

// sleepUntil waits until t, or returns false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// monotonicSeconds is t on CLOCK_MONOTONIC, the clock `perf record -k
// monotonic` stamps samples with.
func monotonicSeconds(t time.Time) float64 {
	var ts unix.Timespec
	now := time.Now()
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return float64(ts.Nano())/1e9 + t.Sub(now).Seconds()
}

// window asks the broker for its profiling window and unpacks the zip.
func (p *profiler) window(ctx context.Context, t *profileTarget, d time.Duration) error {
	q := url.Values{}
	q.Set("seconds", fmt.Sprintf("%.3f", d.Seconds()))
	if p.cfg.ProfileMutexFraction > 0 {
		q.Set("mutex_fraction", fmt.Sprint(p.cfg.ProfileMutexFraction))
	}
	if p.cfg.ProfileBlockRate > 0 {
		q.Set("block_rate", p.cfg.ProfileBlockRate.String())
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/debug/ringlog/profile?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling window: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return fmt.Errorf("profiling window: %w", err)
	}
	for _, f := range zr.File {
		name := path.Base(f.Name) // never a path out of the broker's directory
		rc, err := f.Open()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if name == results.ProfileWindowFile {
			var win struct {
				PID      int               `json:"pid"`
				Seconds  float64           `json:"seconds"`
				CPUUserS float64           `json:"cpu_user_seconds"`
				CPUSysS  float64           `json:"cpu_system_seconds"`
				Counters map[string]uint64 `json:"counters"`
				Notes    []string          `json:"notes"`
			}
			if err := json.Unmarshal(data, &win); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			t.prof.WindowS, t.prof.CPUUserS, t.prof.CPUSysS = win.Seconds, win.CPUUserS, win.CPUSysS
			t.prof.Counters, t.prof.Notes = win.Counters, win.Notes
		}
		t.add(name, data)
	}
	return nil
}

func (t *profileTarget) add(name string, data []byte) {
	rel := t.prof.Dir + "/" + name
	t.files[rel] = data
	t.prof.Files = append(t.prof.Files, rel)
}

// finishPerf stops perf and stores the folded stacks of the samples
// within [from, to] (CLOCK_MONOTONIC seconds) and their flame graph.
func (p *profiler) finishPerf(t *profileTarget, rec *perfRecording, from, to float64) {
	script, err := rec.stop()
	if err != nil {
		t.prof.Perf = &results.Perf{Status: "failed", Reason: err.Error()}
		fmt.Fprintf(p.out, "profile: perf FAILED for broker %d: %v\n", t.prof.NodeID, err)
		return
	}
	folded, samples, err := FoldPerfScript(bytes.NewReader(script), from, to)
	if err != nil || samples == 0 {
		reason := "perf recorded no samples in the window"
		if err != nil {
			reason = "reading perf script output: " + err.Error()
		}
		t.prof.Perf = &results.Perf{Status: "failed", Reason: reason}
		fmt.Fprintf(p.out, "profile: perf FAILED for broker %d: %s\n", t.prof.NodeID, reason)
		return
	}
	var buf bytes.Buffer
	WriteFolded(&buf, folded)
	t.add(results.PerfFoldedFile, buf.Bytes())
	title := fmt.Sprintf("broker %d: perf record -g -F %d, %.1f s window", t.prof.NodeID, p.cfg.PerfFreq, p.cfg.Duration.Seconds())
	t.add(results.PerfFlameSVGFile, results.RenderFlameGraph(title, folded))
	t.prof.Perf = &results.Perf{Status: "captured", Samples: samples,
		Files: []string{t.prof.Dir + "/" + results.PerfFoldedFile, t.prof.Dir + "/" + results.PerfFlameSVGFile}}
}

// wait returns the profiles once every window ended, with their files.
func (p *profiler) wait() (*results.Profiles, map[string][]byte) {
	p.wg.Wait()
	ps := &results.Profiles{WindowStart: p.start, WindowS: p.cfg.Duration.Seconds()}
	files := map[string][]byte{}
	for _, t := range p.targets {
		ps.Brokers = append(ps.Brokers, t.prof)
		for k, v := range t.files {
			files[k] = v
		}
	}
	return ps, files
}
