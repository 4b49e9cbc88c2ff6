package results

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// writeRun writes a synthetic result directory of 3 one-second intervals.
func writeRun(t *testing.T, dir string, started time.Time, seed int64, mod func(r *Result)) {
	t.Helper()
	iv, _ := intervals(started.UnixMilli(), 3, seed, 10_000)
	r := &Run{Result: Result{Label: filepath.Base(dir), StartedAt: started, DurationS: 3, WarmupS: 1,
		TargetRate: 1000, AchievedRate: 1000, ThroughputMBps: 1, MessageSize: 1000,
		MessagesSent: 3000, MessagesAcked: 3000, MessagesConsumed: 2990, MessagesRetried: 7, Errors: 1,
		Retries: 3, ErrorMix: map[string]int64{"NOT_LEADER_OR_FOLLOWER": 3},
		FirstError: "boom", SLA: SLA{TargetP99Ms: 10},
		Workload: map[string]string{"topic": "t", "message_size": "1000", "acks": "all", "compression": "none"}},
		Ack: iv, SendDelay: iv}
	if mod != nil {
		mod(&r.Result)
	}
	r.Finalize()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
}

func mergeDirs(out string, dirs ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	_, err = MergeDirs(&o, &e, out, "merged", dirs)
	return o.String(), e.String(), err
}

// TestMergeCommandWarnsAndSums: `report merge` (MergeDirs) of runs started 2.5 s
// apart with different workloads warns on stderr and in result.json, and
// sums every counter.
func TestMergeCommandWarnsAndSums(t *testing.T) {
	base := time.Now().Truncate(time.Second)
	tmp := t.TempDir()
	a, b, out := filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "merged")
	writeRun(t, a, base, 1, nil)
	writeRun(t, b, base.Add(2500*time.Millisecond), 2, func(r *Result) {
		r.MessageSize, r.Workload = 100, map[string]string{"topic": "other", "message_size": "100", "acks": "1", "compression": "zstd"}
		r.MessagesRetried, r.Errors, r.FirstError = 5, 2, ""
		r.Retries, r.ErrorMix = 4, map[string]int64{"KAFKA_STORAGE_ERROR": 10, "NOT_LEADER_OR_FOLLOWER": 1}
	})
	_, stderr, err := mergeDirs(out, a, b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"started 2.5s apart", "differ in message_size", "differ in acks", "differ in compression", "differ in topic"} {
		found := false
		for _, w := range m.Warnings {
			found = found || strings.Contains(w, want)
		}
		if !found {
			t.Errorf("merged result.json warnings lack %q: %q", want, m.Warnings)
		}
		if !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks warning %q:\n%s", want, stderr)
		}
	}
	if m.MessagesRetried != 12 || m.Errors != 3 || m.MessagesSent != 6000 || m.MessagesAcked != 6000 ||
		m.MessagesConsumed != 5980 || m.TargetRate != 2000 || m.AchievedRate != 2000 || m.ThroughputMBps != 2 {
		t.Fatalf("counters not summed: retried %d errors %d sent %d acked %d consumed %d target %v achieved %v MB/s %v",
			m.MessagesRetried, m.Errors, m.MessagesSent, m.MessagesAcked, m.MessagesConsumed, m.TargetRate, m.AchievedRate, m.ThroughputMBps)
	}
	if m.Retries != 7 || len(m.ErrorMix) != 2 || m.ErrorMix["KAFKA_STORAGE_ERROR"] != 10 || m.ErrorMix["NOT_LEADER_OR_FOLLOWER"] != 4 {
		t.Fatalf("retries %d, error mix %v: want 7 and the per-code sums", m.Retries, m.ErrorMix)
	}
	if m.Label != "merged" {
		t.Errorf("merged label %q", m.Label)
	}
	if !strings.Contains(m.FirstError, "boom") || len(m.MergedFrom) != 2 {
		t.Fatalf("first error %q, merged from %v", m.FirstError, m.MergedFrom)
	}

	// Runs that fit together merge without a warning.
	c := filepath.Join(tmp, "c")
	writeRun(t, c, base.Add(300*time.Millisecond), 3, nil)
	_, stderr, err = mergeDirs(filepath.Join(tmp, "merged2"), a, c)
	if err != nil {
		t.Fatal(err)
	}
	if m2, err := ReadJSON(filepath.Join(tmp, "merged2")); err != nil || len(m2.Warnings) != 0 || stderr != "" {
		t.Fatalf("warnings for matching runs: %v %q %q", err, m2.Warnings, stderr)
	}
}

// TestCompareCommandOutput: `report compare` (CompareDirs) prints one column per run
// and writes the overlay page.
func TestCompareCommandOutput(t *testing.T) {
	base := time.Now().Truncate(time.Second)
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "run-a"), filepath.Join(tmp, "run-b")
	writeRun(t, a, base, 1, func(r *Result) { r.Environment.BrokerIOPath, r.Environment.BrokerFsync = "uring", "always" })
	writeRun(t, b, base, 2, func(r *Result) {
		r.TargetRate, r.AchievedRate = 5000, 4900
		r.Retries, r.ErrorMix = 12, map[string]int64{"KAFKA_STORAGE_ERROR": 9, "NOT_ENOUGH_REPLICAS": 13}
	})
	html := filepath.Join(tmp, "cmp.html")
	var o bytes.Buffer
	err := CompareDirs(&o, html, []string{a, b})
	stdout := o.String()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if f := strings.Fields(lines[0]); len(f) != 3 || f[0] != "run" || f[1] != "run-a" || f[2] != "run-b" {
		t.Fatalf("header %q, want run and the two labels\n%s", lines[0], stdout)
	}
	rows := map[string][]string{}
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) >= 3 {
			rows[strings.Join(f[:len(f)-2], " ")] = f[len(f)-2:]
		}
	}
	for row, want := range map[string][2]string{
		"target msg/s":   {"1000", "5000"},
		"achieved msg/s": {"1000", "4900"},
		"errors":         {"1", "1"},
		"retries":        {"3", "12"},
		"SLA":            {"fail", "fail"},
	} {
		if got := rows[row]; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("row %q = %v, want %v\n%s", row, got, want, stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*io path\s+uring\s+-\s*$`).MatchString(stdout) {
		t.Errorf("io path row wrong:\n%s", stdout)
	}
	for _, row := range []string{"ack p50 ms", "ack p99 ms", "ack p99.9 ms", "send delay p99 ms", "saturated"} {
		if _, ok := rows[row]; !ok {
			t.Errorf("compare lacks row %q:\n%s", row, stdout)
		}
	}
	for _, want := range []string{"error mix run-a: NOT_LEADER_OR_FOLLOWER: 3\n",
		"error mix run-b: NOT_ENOUGH_REPLICAS: 13, KAFKA_STORAGE_ERROR: 9\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.HasSuffix(stdout, "wrote comparison page: "+html+"\n") {
		t.Fatalf("no line saying where the page went:\n%s", stdout)
	}
	page, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(page, []byte("<polyline")) {
		t.Fatalf("overlay page: %v", err)
	}
}

// TestNoDirs: merge and compare without a directory say so (the command
// exits 2 on ErrNoDirs).
func TestNoDirs(t *testing.T) {
	if _, _, err := mergeDirs(filepath.Join(t.TempDir(), "m")); !errors.Is(err, ErrNoDirs) {
		t.Fatalf("merge: %v, want ErrNoDirs", err)
	}
	if err := CompareDirs(&bytes.Buffer{}, "", nil); !errors.Is(err, ErrNoDirs) {
		t.Fatalf("compare: %v, want ErrNoDirs", err)
	}
}
