package loadgen

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/results"
)

// TestLoadgenSASL runs the real `ringlog loadgen` against a broker whose
// TLS listener requires SASL, authenticating as alice with SCRAM-SHA-512
// (the default mechanism for --sasl-user), with each producer client and a
// consumer, the password only in the environment. A wrong password must
// end the run quickly with an authentication error, not hang or retry.
func TestLoadgenSASL(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	b, certs := harness.StartSASLBroker(t)
	loadgen := func(t *testing.T, password string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.RinglogBin, append([]string{"loadgen",
			"--bootstrap", b.TLSAddr, "--tls-ca", certs.Ca, "--sasl-user", "alice",
			"--partitions", "2", "--rate", "1000", "--message-size", "200",
			"--warmup", "500ms", "--duration", "2s", "--drain-timeout", "10s", "--quiet"}, args...)...)
		cmd.Env = append(os.Environ(), "RINGLOG_SASL_PASSWORD="+password)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("loadgen did not finish in 60 s:\n%s", out.String())
		}
		return out.String(), err
	}

	for _, client := range []string{"lean", "kgo"} {
		t.Run(client, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			out, err := loadgen(t, "wonder land", "--client", client, "--topic", "lg-sasl-"+client,
				"--consumers", "1", "--out", dir)
			if err != nil {
				t.Fatalf("loadgen --client %s over TLS+SASL: %v\n%s\nbroker:\n%s", client, err, out, b.Out.String())
			}
			res, err := results.ReadJSON(dir)
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || res.MessagesAcked < 1900 || res.MessagesConsumed != res.MessagesAcked {
				t.Fatalf("acked %d of ~2000, consumed %d, errors %d (%s)\n%s", res.MessagesAcked, res.MessagesConsumed, res.Errors, res.FirstError, out)
			}
			if w := res.Workload; w["tls"] != "true" || w["sasl_mechanism"] != "SCRAM-SHA-512" || w["sasl_user"] != "alice" {
				t.Errorf("result.json workload: %v", w)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "result.json"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte("wonder land")) || strings.Contains(out, "wonder land") {
				t.Fatal("the password appears in result.json or the output")
			}
		})
	}

	t.Run("wrong password", func(t *testing.T) {
		for _, client := range []string{"lean", "kgo"} {
			start := time.Now()
			out, err := loadgen(t, "wonderland", "--client", client, "--topic", "lg-sasl-bad")
			took := time.Since(start)
			if err == nil {
				t.Fatalf("%s: loadgen with a wrong password succeeded:\n%s", client, out)
			}
			if !strings.Contains(out, `SASL SCRAM-SHA-512 authentication as "alice" failed`) || !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
				t.Fatalf("%s: no clear authentication error:\n%s", client, out)
			}
			// The broker delays each failure 500 ms and franz-go tries a
			// second connection; far below the 30 s metadata timeout.
			if took > 15*time.Second {
				t.Fatalf("%s: failing took %v", client, took)
			}
			t.Logf("%s: %v after %v:\n%s", client, err, took, out)
			if strings.Contains(out, "wonderland") {
				t.Fatalf("%s: the password appears in the output:\n%s", client, out)
			}
		}
	})
}
