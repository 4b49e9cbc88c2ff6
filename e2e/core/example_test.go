package core

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
)

// TestOffsetsExample runs `ringlog example offsets` (it starts its own
// broker and consumer processes, and SIGKILLs one between its database
// write and its commit) and checks what it reports.
func TestOffsetsExample(t *testing.T) {
	t.Parallel()
	ctx := harness.Context(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, harness.RinglogBin, "example", "offsets", "--dir", t.TempDir())
	cmd.Env = append(os.Environ(), "RINGLOG_IO="+harness.IOMode())
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil {
		t.Fatalf("example failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"group practice-summary: committed next offset 40",
		"received offset 40: session-7=\"completed rehearsal\"",
		"committed next offset 41",
		"offset 41 is in the database but NOT committed: SIGKILL",
		"group practice-summary: committed next offset is still 41",
		"restart the group: it resumes at the committed offset",
		"idempotent destination SKIPPED it",
		"committed next offset 42",
		"received offset 42: session-7=\"saved reflection\"",
		"committed next offset 43",
		"OffsetFetch: group practice-summary committed next offset 43 on practice-events-0",
		"practice database: rehearsals=1 points=1 (naive counter: 2) reflections=1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The restarted consumer's first record is 41 (a redelivery).
	restart := out[strings.Index(out, "restart the group"):]
	if i := strings.Index(restart, "received offset "); i < 0 || !strings.HasPrefix(restart[i:], "received offset 41:") {
		t.Errorf("restarted consumer did not resume at 41")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
