package results

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// cpuProfile builds a CPU profile whose samples are stacks (leaf first)
// with CPU nanoseconds.
func cpuProfile(t *testing.T, stacks map[string]int64) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10_000_000,
		DurationNanos: int64(5 * time.Second),
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	for stack, ns := range stacks {
		var sl []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			loc := locs[name]
			if loc == nil {
				fn := &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = fn
				p.Function = append(p.Function, fn)
				loc = &profile.Location{ID: uint64(len(locs) + 1), Line: []profile.Line{{Function: fn}}}
				locs[name] = loc
				p.Location = append(p.Location, loc)
			}
			sl = append(sl, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: sl, Value: []int64{ns / 10_000_000, ns}})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const ms = int64(time.Millisecond)

var testStacks = map[string]int64{
	// produce: the append under the handler under the read loop
	"syscall.Syscall6;github.com/ringlog/ringlog/engine.(*Partition).Append;github.com/ringlog/ringlog/netpath.handleProduce;github.com/ringlog/ringlog/netpath.(*conn).readLoop": 400 * ms,
	// fetch send
	"syscall.Syscall6;github.com/ringlog/ringlog/netpath.(*conn).sendfile;github.com/ringlog/ringlog/netpath.(*conn).writeSendfile;github.com/ringlog/ringlog/netpath.(*conn).writeResponse;github.com/ringlog/ringlog/netpath.(*conn).writeLoop": 300 * ms,
	// ring owner
	"syscall.Syscall6;github.com/ringlog/ringlog/iouring.(*Ring).SubmitAndWait;github.com/ringlog/ringlog/engine.(*uringQueue).run": 200 * ms,
	// GC
	"runtime.scanobject;runtime.gcDrain;runtime.gcBgMarkWorker": 100 * ms,
}

func TestAnalyzeCPU(t *testing.T) {
	a, err := AnalyzeCPU(cpuProfile(t, testStacks), 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.Total != time.Second || a.Duration != 5*time.Second {
		t.Fatalf("total %v duration %v", a.Total, a.Duration)
	}
	if len(a.TopFlat) != 3 || a.TopFlat[0].Name != "syscall.Syscall6" || a.TopFlat[0].Flat != 900*time.Millisecond {
		t.Fatalf("top flat %+v", a.TopFlat)
	}
	if a.TopCum[0].Name != "syscall.Syscall6" || a.TopCum[1].Name != "github.com/ringlog/ringlog/engine.(*Partition).Append" {
		t.Fatalf("top cum %+v", a.TopCum)
	}
	got := map[string]time.Duration{}
	for _, p := range a.Paths {
		got[p.Name] = p.CPU
	}
	for prefix, want := range map[string]time.Duration{
		"produce:": 400 * time.Millisecond, "fetch: send": 300 * time.Millisecond,
		"storage write path": 200 * time.Millisecond, "GC": 100 * time.Millisecond,
	} {
		found := false
		for name, d := range got {
			if strings.HasPrefix(name, prefix) {
				found = true
				if d != want {
					t.Errorf("path %s: %v, want %v", name, d, want)
				}
			}
		}
		if !found {
			t.Errorf("no path %q in %v", prefix, got)
		}
	}
	if _, err := AnalyzeCPU([]byte("not a profile"), 3); err == nil {
		t.Fatal("garbage parsed as a profile")
	}
}

func TestWriteProfilesReadsDir(t *testing.T) {
	dir := t.TempDir()
	bdir := filepath.Join(dir, "profiles", "broker-1")
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, CPUProfileFile), cpuProfile(t, testStacks), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Result{ThroughputMBps: 20, DurationS: 10, Profiles: &Profiles{WindowS: 10, Brokers: []BrokerProfile{{
		Admin: "127.0.0.1:9644", NodeID: 1, Dir: "profiles/broker-1", Files: []string{"profiles/broker-1/cpu.pprof"},
		CPUUserS: 1.5, CPUSysS: 0.5, WindowS: 10, Perf: &Perf{Status: "unavailable", Reason: "perf not found"},
	}}}}
	var out bytes.Buffer
	WriteProfiles(&out, dir, r, nil, 5)
	s := out.String()
	for _, want := range []string{
		"10.0 CPU s per GB produced", // 2 CPU s / 0.2 GB
		"perf: UNAVAILABLE: perf not found",
		filepath.Join(dir, "profiles/broker-1/cpu.pprof"),
		"engine.(*Partition).Append",
		"produce: handle + append",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestRenderFlameGraphIsValidSVG(t *testing.T) {
	svg := RenderFlameGraph(`a <title> & "quotes"`, map[string]int{
		"ringlog;main;a": 3, "ringlog;main;b": 1, "ringlog;kernel_[k]": 2, "ringlog;tiny": 0,
	})
	dec := xml.NewDecoder(bytes.NewReader(svg))
	rects := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid SVG: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// background + all, ringlog, main, a, b, kernel_[k]
	if rects != 7 {
		t.Fatalf("%d rects, want 7:\n%s", rects, svg)
	}
	if !bytes.Contains(svg, []byte("main (4 samples, 66.67%)")) {
		t.Fatalf("no tooltip for main:\n%s", svg)
	}
}
