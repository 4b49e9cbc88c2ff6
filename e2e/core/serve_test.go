package core

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestServeConfiguredByEnv starts a broker whose listeners, data dir,
// fsync policy, io path and node id come only from RINGLOG_* variables.
func TestServeConfiguredByEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := &harness.BrokerProc{T: t, DataDir: dir, Addr: harness.FreePort(t), Admin: harness.FreePort(t)}
	b.Args = []string{"serve"}
	b.Env = []string{
		"RINGLOG_LISTEN=" + b.Addr,
		"RINGLOG_ADMIN_LISTEN=" + b.Admin,
		"RINGLOG_DATA_DIR=" + dir,
		// Not the defaults (always, 1), so /healthz shows they were read.
		"RINGLOG_FSYNC=never",
		"RINGLOG_NODE_ID=7",
		"RINGLOG_IO=" + harness.IOMode(),
	}
	b.Start()
	t.Cleanup(b.Stop)

	h, err := b.Health()
	if err != nil {
		t.Fatal(err)
	}
	if h["fsync"] != "never" || h["node_id"] != float64(7) {
		t.Fatalf("/healthz fsync %v node_id %v, want never and 7 from the environment", h["fsync"], h["node_id"])
	}
	if _, err := os.Stat(filepath.Join(dir, layout.MetaFile)); err != nil {
		t.Fatalf("RINGLOG_DATA_DIR not used: %v", err)
	}

	ctx := harness.Context(t, 30*time.Second)
	prod := b.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("env"))
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Value: testValue(i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := harness.ConsumeAll(ctx, t, b.Addr, "env", len(recs))
	for i, r := range got {
		if err := sameRecord(recs[i], r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// TestIOFlagWithoutIOUring runs the broker on a "host" without io_uring:
// --io uring must refuse to start naming the flag (not the engine's
// Config.IOMode), and --io auto must fall back to sync and say why in
// /healthz io_reason.
func TestIOFlagWithoutIOUring(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the seccomp filter is written for amd64, not %s", runtime.GOARCH)
	}
	prefix := []string{"env", harness.NoURingEnv + "=1", os.Args[0], "--"}

	t.Run("uring refused", func(t *testing.T) {
		b := &harness.BrokerProc{T: t, DataDir: t.TempDir(), Addr: harness.FreePort(t), Admin: harness.FreePort(t), Prefix: prefix}
		b.Args = []string{"serve", "--listen", b.Addr, "--admin-listen", b.Admin, "--data-dir", b.DataDir, "--io", "uring"}
		b.Launch()
		t.Cleanup(b.Stop)
		select {
		case <-b.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("broker still running with --io uring and no io_uring:\n%s", b.Out.String())
		}
		var ee *exec.ExitError
		if !errors.As(b.ExitErr(), &ee) || ee.ExitCode() == 0 {
			t.Fatalf("exit %v, want a non-zero exit:\n%s", b.ExitErr(), b.Out.String())
		}
		out := b.Out.String()
		if !strings.Contains(out, "--io uring") || !strings.Contains(out, "--io auto") || strings.Contains(out, "IOMode") {
			t.Fatalf("error does not name the --io flag (or still names IOMode):\n%s", out)
		}
		if !strings.Contains(out, "not implemented") {
			t.Fatalf("error does not say why io_uring is unusable:\n%s", out)
		}
	})

	t.Run("auto falls back", func(t *testing.T) {
		b := &harness.BrokerProc{T: t, DataDir: t.TempDir(), Addr: harness.FreePort(t), Admin: harness.FreePort(t), Prefix: prefix}
		b.Args = []string{"serve", "--listen", b.Addr, "--admin-listen", b.Admin, "--data-dir", b.DataDir, "--io", "auto"}
		b.Launch()
		t.Cleanup(b.Stop)
		// Not waitReady: it insists on the suite's io path, and this
		// broker cannot run uring.
		var h map[string]any
		harness.Eventually(t, 30*time.Second, "broker ready", func() (bool, string) {
			select {
			case <-b.Exited():
				t.Fatalf("broker exited: %v\n%s", b.ExitErr(), b.Out.String())
			default:
			}
			var err error
			h, err = b.Health()
			return err == nil && h["status"] == "ok", b.Out.String()
		})
		reason, _ := h["io_reason"].(string)
		if h["io_path"] != "sync" || !strings.Contains(reason, "io_uring unavailable") || !strings.Contains(reason, "not implemented") {
			t.Fatalf("/healthz io_path %v io_reason %q, want sync and why io_uring is unavailable", h["io_path"], reason)
		}
		cl := b.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fallback"))
		if err := cl.ProduceSync(harness.Context(t, 20*time.Second), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce on the sync fallback: %v", err)
		}
	})
}

// TestServeMaxProcs: --max-procs sets the broker's GOMAXPROCS, /healthz
// reports it beside the CPUs, and a negative count is refused by name.
func TestServeMaxProcs(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // --max-procs sets GOMAXPROCS, process-wide
	b := harness.StartBroker(t, t.TempDir(), "--max-procs", "1")
	h, err := b.Health()
	if err != nil {
		t.Fatal(err)
	}
	if h["max_procs"] != float64(1) || h["num_cpu"] != float64(runtime.NumCPU()) {
		t.Fatalf("/healthz max_procs %v num_cpu %v, want 1 and %d", h["max_procs"], h["num_cpu"], runtime.NumCPU())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, code := harness.RunRinglogCode(t, ctx, "serve", "--max-procs", "-1", "--data-dir", t.TempDir(),
		"--listen", harness.FreePort(t), "--admin-listen", harness.FreePort(t))
	if code == 0 || !strings.Contains(out, "--max-procs -1") {
		t.Fatalf("serve --max-procs -1: exit %d\n%s", code, out)
	}
}
