package loadgen

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/results"
)

// runLoadgen runs `ringlog loadgen` with args against a broker and returns
// its stdout and stderr; it fails the test if it runs past a minute.
func runLoadgen(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.RinglogBin, append([]string{"loadgen"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("loadgen did not finish in 60 s:\n%s\n%s", out.String(), errOut.String())
	}
	return out.String(), errOut.String(), err
}

// TestHarnessWorkloadOMB: an OpenMessaging Benchmark workload file, in
// OMB's format and kept unchanged in cmd/ringlog/testdata, runs against a real broker
// with only its durations and rate shortened by flags; the result carries
// its name, partitions, consumer group and end-to-end latencies. Files
// with an unsupported or unknown field fail with the field named.
func TestHarnessWorkloadOMB(t *testing.T) {
	b := harness.StartBroker(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "run")
	stdout, stderr, err := runLoadgen(t, "--bootstrap", b.Addr, "--workload", "../../cmd/ringlog/testdata/omb-1-topic-16-partitions-1kb.yaml",
		"--topic", "omb-wl", "--rate", "2000", "--warmup", "1s", "--duration", "3s", "--drain-timeout", "20s", "--quiet", "--out", dir)
	if err != nil {
		t.Fatalf("loadgen --workload: %v\n%s\n%s\nbroker:\n%s", err, stdout, stderr, b.Out.String())
	}
	res, err := results.ReadJSON(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := res.Workload
	if res.Label != "1 producer / 2 consumers on 1 topic" {
		t.Errorf("label %q, want the workload's name", res.Label)
	}
	// The file's values as applied, the flags' overrides, and the file's
	// own values recorded as written.
	for k, want := range map[string]string{"partitions": "16", "message_size": "1024", "consumer_groups": "1", "consumers": "2",
		"producers": "1", "rate": "2000", "duration": "3s", "warmup": "1s", "key_distribution": "keyed over 16 partitions",
		"omb.producerRate": "50000", "omb.testDurationMinutes": "15", "omb.name": "1 producer / 2 consumers on 1 topic",
		"payload": "1000 random values, 50% random bytes"} {
		if w[k] != want {
			t.Errorf("workload %s = %q, want %q", k, w[k], want)
		}
	}
	if res.MessagesAcked < 5000 || res.Errors != 0 {
		t.Errorf("acked %d errors %d: want about 6000 and none", res.MessagesAcked, res.Errors)
	}
	if res.E2ELatencyMs == nil || res.E2ELatencyMs.P50 <= 0 || res.MessagesConsumed < res.MessagesAcked {
		t.Errorf("end-to-end latency %+v, consumed %d of %d acked: want every message read by the group", res.E2ELatencyMs, res.MessagesConsumed, res.MessagesAcked)
	}
	if res.Spread == nil || res.Spread.Written != 16 {
		t.Errorf("partition spread %+v: want all 16 written", res.Spread)
	}

	for _, tc := range []struct{ file, want string }{
		{"../../cmd/ringlog/testdata/omb-unsupported-topics.yaml", "field topics (line 4): 10: ringlog's generator drives one topic"},
		{"../../cmd/ringlog/testdata/omb-unknown-field.yaml", "unknown field producerPerTopic (line 7)"},
	} {
		stdout, stderr, err := runLoadgen(t, "--bootstrap", b.Addr, "--workload", tc.file, "--duration", "1s", "--quiet")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: %v, stderr %q (stdout %q): want exit status 2 naming %q", tc.file, err, stderr, stdout, tc.want)
		}
	}
}

// TestHarnessBacklogDrain: a backlog of a few MB, asked for with flags
// alone, builds while the group's consumers are stopped and drains while
// the producer continues; result.json and the text report say so.
func TestHarnessBacklogDrain(t *testing.T) {
	b := harness.StartBroker(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "run")
	const backlog = 4 << 20
	stdout, stderr, err := runLoadgen(t, "--bootstrap", b.Addr, "--topic", "backlog", "--partitions", "4",
		"--rate", "4000", "--message-size", "1024", "--consumers", "2", "--consumer-groups", "1",
		"--backlog-bytes", "4194304", "--warmup", "0s", "--duration", "8s", "--drain-timeout", "20s", "--quiet", "--out", dir)
	if err != nil {
		t.Fatalf("loadgen --backlog-bytes: %v\n%s\n%s\nbroker:\n%s", err, stdout, stderr, b.Out.String())
	}
	res, err := results.ReadJSON(dir)
	if err != nil {
		t.Fatal(err)
	}
	bd := res.Backlog
	if bd == nil {
		t.Fatalf("no backlog_drain in result.json:\n%s", stdout)
	}
	if !bd.Drained || bd.TargetBytes != backlog || bd.BacklogBytes < backlog || bd.BacklogBytes > 2*backlog ||
		bd.BacklogMessages != bd.BacklogBytes/1024 {
		t.Errorf("backlog %+v: want about %d bytes built and drained\n%s", bd, backlog, stdout)
	}
	// Built at 4000 msg/s of 1 KiB: about a second. Drained faster than
	// it is produced (the consumers read the backlog and keep up with the
	// producer), within the run.
	if bd.FillSeconds < 0.5 || bd.FillSeconds > 4 || bd.DrainSeconds <= 0 || bd.DrainSeconds > 7 || bd.DrainRate <= 4000 {
		t.Errorf("backlog %+v: fill, drain time or drain rate implausible", bd)
	}
	if bd.DrainRate*bd.DrainSeconds < float64(bd.BacklogMessages) {
		t.Errorf("backlog %+v: read fewer messages while draining than the backlog held", bd)
	}
	if res.E2ELatencyMs == nil || res.E2ELatencyMs.Max < 500 {
		t.Errorf("end-to-end %+v: the backlog waited about a second to be read; max should show it", res.E2ELatencyMs)
	}
	if !strings.Contains(stdout, "backlog") || !strings.Contains(stdout, "drained in") {
		t.Errorf("text report lacks the backlog line:\n%s", stdout)
	}
}
