package results

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
)

// Profiles is the profiling section of result.json: what `ringlog loadgen
// --profile-broker` captured of each broker during the measured window.
// File paths are relative to the result directory.
type Profiles struct {
	WindowStart time.Time       `json:"window_start"`
	WindowS     float64         `json:"window_s"`
	Brokers     []BrokerProfile `json:"brokers"`
}

// BrokerProfile is one broker's profiling window.
type BrokerProfile struct {
	Admin  string `json:"admin"`
	NodeID int32  `json:"node_id"`
	PID    int    `json:"pid,omitempty"`
	// Dir holds the broker's files: cpu.pprof, heap.pprof, mutex.pprof,
	// block.pprof, goroutine.pprof, window.json, and perf output.
	Dir   string   `json:"dir"`
	Files []string `json:"files,omitempty"`
	// CPU time the broker process used during the window (getrusage, all
	// threads), and the window as the broker measured it.
	CPUUserS float64 `json:"cpu_user_s"`
	CPUSysS  float64 `json:"cpu_system_s"`
	WindowS  float64 `json:"window_s"`
	// Counters are the broker's counter deltas over the window
	// (appended_bytes, bytes_in, bytes_out, fsyncs, ...).
	Counters map[string]uint64 `json:"counters,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	// Error is set when the window could not be captured.
	Error string `json:"error,omitempty"`
	Perf  *Perf  `json:"perf,omitempty"`
}

// CPUSeconds is user plus system CPU time over the window.
func (b BrokerProfile) CPUSeconds() float64 { return b.CPUUserS + b.CPUSysS }

// Perf is the outcome of `perf record -g` on a broker for the window.
type Perf struct {
	// Status is "captured", "unavailable" (perf cannot run here: Reason
	// says why) or "failed" (it started but produced nothing usable).
	Status  string   `json:"status"`
	Reason  string   `json:"reason,omitempty"`
	Samples int      `json:"samples,omitempty"`
	Files   []string `json:"files,omitempty"`
}

// Profile file names inside a broker's profile directory.
const (
	CPUProfileFile    = "cpu.pprof"
	PerfFoldedFile    = "perf.folded"
	PerfFlameSVGFile  = "perf-flame.svg"
	ProfileWindowFile = "window.json"
)

// FuncCPU is one function's CPU time in a profile.
type FuncCPU struct {
	Name      string
	Flat, Cum time.Duration
}

// PathCPU is the CPU time of one part of the broker (a request path, the
// write path, GC...) and its hottest functions.
type PathCPU struct {
	Name string
	CPU  time.Duration
	Top  []FuncCPU // by flat time within this path
}

// CPUAnalysis summarizes a CPU profile.
type CPUAnalysis struct {
	Total    time.Duration // CPU time sampled
	Duration time.Duration // wall time profiled
	TopFlat  []FuncCPU
	TopCum   []FuncCPU
	Paths    []PathCPU
}

// pathRules attribute each CPU sample to the first rule with a frame
// whose function name contains one of its markers; the order matters
// (a produce handler runs under the connection's read loop).
var pathRules = []struct {
	name    string
	markers []string
}{
	{"produce: handle + append (reader goroutine), wait for durability (writer)", []string{"netpath.handleProduce"}},
	{"fetch: read + long poll", []string{"netpath.handleFetch", "netpath.(*Server).fetch", "netpath.(*Server).readFetch"}},
	{"fetch: send record data (sendfile, splice, copy)", []string{"netpath.(*conn).sendfile", "netpath.(*conn).splice", "netpath.(*copyWriter).file"}},
	{"responses: encode + write (all APIs)", []string{"netpath.(*conn).writeResponse"}},
	{"storage write path (ring owner, completer, flusher)", []string{"engine.(*uringQueue)", "engine.(*syncQueue)", "engine.flushPartition"}},
	{"replication: follower fetcher", []string{"replication.(*Fetcher", "peer.(*Client).Fetch", "peer.(*conn)"}},
	{"replication: leader state, high watermark", []string{"broker.(*replicaManager)", "broker.(*leaderPart)", "replication.(*Purgatory)"}},
	{"consumer groups", []string{"coordinator/group.", "broker.(*groupBridge)"}},
	{"requests: read, decode, dispatch (other APIs)", []string{"netpath.(*conn)."}},
	{"controller: raft + metadata", []string{"hashicorp/raft", "ringlog/ringlog/coordinator"}},
	{"metrics + profiling", []string{"prometheus/client_golang", "runtime/pprof", "net/http"}},
	{"GC (background workers)", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"scheduler, idle, other runtime", []string{"runtime."}},
}

const otherPath = "other"

// AnalyzeCPU reads a pprof CPU profile and reports its top functions (flat
// and cumulative, top of each) and the CPU by broker path.
func AnalyzeCPU(data []byte, top int) (*CPUAnalysis, error) {
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, err
	}
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return nil, fmt.Errorf("not a CPU profile (sample types %v)", sampleTypes(p))
	}
	a := &CPUAnalysis{Duration: time.Duration(p.DurationNanos)}
	flat, cum := map[string]int64{}, map[string]int64{}
	paths := map[string]int64{}
	pathFlat := map[string]map[string]int64{}
	var frames []string
	for _, s := range p.Sample {
		v := s.Value[vi]
		if v == 0 {
			continue
		}
		a.Total += time.Duration(v)
		frames = frames[:0]
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				if ln.Function != nil {
					frames = append(frames, ln.Function.Name)
				}
			}
		}
		if len(frames) == 0 {
			frames = append(frames, "[unknown]")
		}
		flat[frames[0]] += v
		seen := map[string]bool{}
		for _, f := range frames {
			if !seen[f] {
				seen[f] = true
				cum[f] += v
			}
		}
		path := classifyPath(frames)
		paths[path] += v
		if pathFlat[path] == nil {
			pathFlat[path] = map[string]int64{}
		}
		pathFlat[path][frames[0]] += v
	}
	a.TopFlat = topFuncs(flat, cum, top, false)
	a.TopCum = topFuncs(flat, cum, top, true)
	for name, v := range paths {
		pf := map[string]int64{}
		for f, fv := range pathFlat[name] {
			pf[f] = fv
		}
		a.Paths = append(a.Paths, PathCPU{Name: name, CPU: time.Duration(v), Top: topFuncs(pf, nil, 6, false)})
	}
	sort.Slice(a.Paths, func(i, j int) bool { return a.Paths[i].CPU > a.Paths[j].CPU })
	return a, nil
}

func sampleTypes(p *profile.Profile) []string {
	var out []string
	for _, st := range p.SampleType {
		out = append(out, st.Type+"/"+st.Unit)
	}
	return out
}

// classifyPath names the path a stack (leaf first) belongs to.
func classifyPath(frames []string) string {
	for _, r := range pathRules {
		for _, f := range frames {
			for _, m := range r.markers {
				if strings.Contains(f, m) {
					return r.name
				}
			}
		}
	}
	return otherPath
}

// topFuncs returns the n functions with the most flat (or, byCum,
// cumulative) time, ties broken by the other measure, then by name.
func topFuncs(flat, cum map[string]int64, n int, byCum bool) []FuncCPU {
	all := cum
	if all == nil {
		all = flat
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	first, second := flat, cum
	if byCum {
		first, second = cum, flat
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if first[a] != first[b] {
			return first[a] > first[b]
		}
		if second[a] != second[b] {
			return second[a] > second[b]
		}
		return a < b
	})
	if len(names) > n {
		names = names[:n]
	}
	out := make([]FuncCPU, len(names))
	for i, name := range names {
		out[i] = FuncCPU{Name: name, Flat: time.Duration(flat[name]), Cum: time.Duration(cum[name])}
	}
	return out
}

// shortName trims the module path from a function name for tables.
func shortName(fn string) string {
	fn = strings.TrimPrefix(fn, "github.com/ringlog/ringlog/")
	if i := strings.LastIndex(fn, "/"); i >= 0 && !strings.HasPrefix(fn, "netpath") {
		fn = fn[i+1:]
	}
	return fn
}

// ProducedGB is the payload the run got acknowledged in its measured
// window, in GB (1e9 bytes).
func (r *Result) ProducedGB() float64 { return r.ThroughputMBps * r.DurationS / 1e3 }

// WriteProfiles prints the profiling section of a run: per broker its
// files, CPU time and CPU seconds per GB produced, perf's outcome, the
// CPU by path and the top functions of its CPU profile. Files are read
// from dir, or from files (a run not written yet) when it has them.
func WriteProfiles(w io.Writer, dir string, r *Result, files map[string][]byte, top int) {
	ps := r.Profiles
	if ps == nil {
		return
	}
	gb := r.ProducedGB()
	fmt.Fprintf(w, "\nprofiles: %d broker(s), window %.1f s from %s (the measured window)\n",
		len(ps.Brokers), ps.WindowS, ps.WindowStart.Format("15:04:05.000"))
	var totalCPU float64
	for _, b := range ps.Brokers {
		totalCPU += b.CPUSeconds()
	}
	if gb > 0 {
		fmt.Fprintf(w, "brokers' CPU: %.2f s for %.3f GB produced = %.1f CPU s per GB produced (all brokers)\n", totalCPU, gb, totalCPU/gb)
	}
	for _, b := range ps.Brokers {
		fmt.Fprintf(w, "\n== broker %d (admin %s, pid %d): %s\n", b.NodeID, b.Admin, b.PID, filepath.Join(dir, b.Dir))
		if b.Error != "" {
			fmt.Fprintf(w, "   profiling window failed: %s\n", b.Error)
		} else {
			line := fmt.Sprintf("   CPU %.2f s (user %.2f, system %.2f) over %.1f s = %.2f cores",
				b.CPUSeconds(), b.CPUUserS, b.CPUSysS, b.WindowS, b.CPUSeconds()/max(b.WindowS, 1e-9))
			if gb > 0 {
				line += fmt.Sprintf("; %.1f CPU s per GB produced", b.CPUSeconds()/gb)
			}
			if ab := b.Counters["appended_bytes"]; ab > 0 {
				line += fmt.Sprintf(", %.1f per GB appended here", b.CPUSeconds()/(float64(ab)/1e9))
			}
			fmt.Fprintln(w, line)
		}
		for _, f := range b.Files {
			fmt.Fprintf(w, "   %s\n", filepath.Join(dir, f))
		}
		for _, n := range b.Notes {
			fmt.Fprintf(w, "   note: %s\n", n)
		}
		if b.Perf != nil {
			switch b.Perf.Status {
			case "captured":
				fmt.Fprintf(w, "   perf: captured %d samples (folded stacks and flame graph listed above)\n", b.Perf.Samples)
			default:
				fmt.Fprintf(w, "   perf: %s: %s\n", strings.ToUpper(b.Perf.Status), b.Perf.Reason)
			}
		}
		data := files[filepath.Join(b.Dir, CPUProfileFile)]
		if data == nil {
			var err error
			if data, err = os.ReadFile(filepath.Join(dir, b.Dir, CPUProfileFile)); err != nil {
				if b.Error == "" {
					fmt.Fprintf(w, "   cpu profile: %v\n", err)
				}
				continue
			}
		}
		a, err := AnalyzeCPU(data, top)
		if err != nil {
			fmt.Fprintf(w, "   cpu profile: %v\n", err)
			continue
		}
		writeCPUAnalysis(w, a)
		if cpu := b.CPUSeconds(); cpu > 0 {
			fmt.Fprintf(w, "   (pprof sampled %.0f%% of the process's CPU time: it sees Go threads only; kernel io_uring workers are in getrusage and perf)\n",
				100*a.Total.Seconds()/cpu)
		}
		fmt.Fprintf(w, "   explore: go tool pprof -http=: %s\n", filepath.Join(dir, b.Dir, CPUProfileFile))
	}
}

func writeCPUAnalysis(w io.Writer, a *CPUAnalysis) {
	pct := func(d time.Duration) float64 {
		if a.Total == 0 {
			return 0
		}
		return 100 * float64(d) / float64(a.Total)
	}
	fmt.Fprintf(w, "   cpu profile: %.2f s sampled in %.1f s\n", a.Total.Seconds(), a.Duration.Seconds())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "   CPU by path\tcpu s\t%%\thottest (flat)\n")
	for _, p := range a.Paths {
		var hot []string
		for _, f := range p.Top[:min(3, len(p.Top))] {
			hot = append(hot, fmt.Sprintf("%s %.0f%%", shortName(f.Name), pct(f.Flat)))
		}
		fmt.Fprintf(tw, "   %s\t%.2f\t%.1f\t%s\n", p.Name, p.CPU.Seconds(), pct(p.CPU), strings.Join(hot, ", "))
	}
	tw.Flush()
	for _, t := range []struct {
		title string
		funcs []FuncCPU
	}{{"top functions by CPU (flat: in the function itself)", a.TopFlat}, {"top functions by cumulative CPU (with callees)", a.TopCum}} {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "   %s\tflat s\tflat %%\tcum s\tcum %%\n", t.title)
		for _, f := range t.funcs {
			fmt.Fprintf(tw, "   %s\t%.2f\t%.1f\t%.2f\t%.1f\n", shortName(f.Name), f.Flat.Seconds(), pct(f.Flat), f.Cum.Seconds(), pct(f.Cum))
		}
		tw.Flush()
	}
}

// profileSummary renders WriteProfiles for the HTML report.
func profileSummary(r *Run) string {
	var b bytes.Buffer
	WriteProfiles(&b, ".", &r.Result, r.Files, 15)
	return b.String()
}
