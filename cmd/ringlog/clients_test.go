package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// These tests need kcat and python3-confluent-kafka from Debian (.ci/run
// installs them). Missing tools fail the test rather than skip it, so a CI
// without them cannot pass silently; set RINGLOG_SKIP_EXTERNAL_CLIENTS=1 to
// opt out locally.

func needTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skipf("%s missing and RINGLOG_SKIP_EXTERNAL_CLIENTS=1", path)
		}
		t.Fatalf("%s not installed (apt-get install kcat python3-confluent-kafka)", path)
	}
}

func runCmd(t *testing.T, stdin string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx := testContext(t, timeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, out.String(), errb.String())
	}
	return out.String()
}

func TestKcatProduceConsume(t *testing.T) {
	needTool(t, "/usr/bin/kcat")
	b := startBroker(t, t.TempDir())
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			// The topic does not exist: librdkafka's producer relies on
			// auto-creation through Metadata.
			topic := "kcat-" + codec
			var in strings.Builder
			const n = 300
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "k%d:message %d %s\n", i%5, i, strings.Repeat("x", i%50))
			}
			runCmd(t, in.String(), 60*time.Second, "/usr/bin/kcat", "-b", b.addr, "-t", topic, "-P", "-K:", "-z", codec,
				"-X", "acks=all", "-X", "linger.ms=5")
			out := runCmd(t, "", 60*time.Second, "/usr/bin/kcat", "-b", b.addr, "-t", topic, "-C", "-e", "-q",
				"-o", "beginning", "-f", "%k:%s|%o\n")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != n {
				t.Fatalf("kcat read %d lines, want %d:\n%s", len(lines), n, out)
			}
			for i, l := range lines {
				want := fmt.Sprintf("k%d:message %d %s|%d", i%5, i, strings.Repeat("x", i%50), i)
				if l != want {
					t.Fatalf("line %d: %q, want %q", i, l, want)
				}
			}
		})
	}
	// Metadata as librdkafka sees it.
	out := runCmd(t, "", 30*time.Second, "/usr/bin/kcat", "-b", b.addr, "-L", "-t", "kcat-none")
	if !strings.Contains(out, "1 brokers") || !strings.Contains(out, `topic "kcat-none" with 1 partitions`) {
		t.Fatalf("kcat -L output:\n%s", out)
	}
}

func TestConfluentKafkaPython(t *testing.T) {
	needTool(t, "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skip("confluent_kafka missing")
		}
		t.Fatal("python3-confluent-kafka not installed")
	}
	b := startBroker(t, t.TempDir())
	ctx := testContext(t, 30*time.Second)
	adm := kadm.NewClient(b.client(t))
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "py-" + codec
			if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			out := runCmd(t, "", 120*time.Second, "/usr/bin/python3", "testdata/confluent_roundtrip.py", b.addr, topic, "2000", codec)
			if !strings.Contains(out, "OK 2000") {
				t.Fatalf("python output: %s", out)
			}
		})
	}
}
