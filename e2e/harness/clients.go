package harness

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func NeedTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skipf("%s missing and RINGLOG_SKIP_EXTERNAL_CLIENTS=1", path)
		}
		t.Fatalf("%s not installed (apt-get install kcat python3-confluent-kafka)", path)
	}
}

// NeedConfluentKafka skips or fails t, as needTool does, unless python3
// can import confluent_kafka.
func NeedConfluentKafka(t *testing.T) {
	t.Helper()
	NeedTool(t, "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skip("confluent_kafka missing")
		}
		t.Fatal("python3-confluent-kafka not installed")
	}
}

func RunCmd(t *testing.T, stdin string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx := Context(t, timeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, out.String(), errb.String())
	}
	return out.String()
}
