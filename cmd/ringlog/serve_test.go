package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ringlog/ringlog/internal/layout"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

// TestServeFlagsHaveEnvVars: the README promises that every serve flag can
// be set as RINGLOG_<FLAG>; a flag added without EnvVars breaks that
// silently.
func TestServeFlagsHaveEnvVars(t *testing.T) {
	flags := serveCommand().Flags
	if len(flags) < 10 {
		t.Fatalf("serve has only %d flags", len(flags))
	}
	for _, f := range flags {
		name := f.Names()[0]
		df, ok := f.(cli.DocGenerationFlag)
		if !ok {
			t.Errorf("--%s (%T) cannot report its environment variables", name, f)
			continue
		}
		want := "RINGLOG_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		found := false
		for _, e := range df.GetEnvVars() {
			found = found || e == want
		}
		if !found {
			t.Errorf("--%s: EnvVars %v, want %s among them", name, df.GetEnvVars(), want)
		}
	}
}

// TestServeConfiguredByEnv starts a broker whose listeners, data dir,
// fsync policy, io path and node id come only from RINGLOG_* variables.
func TestServeConfiguredByEnv(t *testing.T) {
	dir := t.TempDir()
	b := &brokerProc{t: t, dataDir: dir, addr: freePort(t), admin: freePort(t)}
	b.args = []string{"serve"}
	b.env = []string{
		"RINGLOG_LISTEN=" + b.addr,
		"RINGLOG_ADMIN_LISTEN=" + b.admin,
		"RINGLOG_DATA_DIR=" + dir,
		// Not the defaults (always, 1), so /healthz shows they were read.
		"RINGLOG_FSYNC=never",
		"RINGLOG_NODE_ID=7",
		"RINGLOG_IO=" + ioMode(),
	}
	b.start()
	t.Cleanup(b.stop)

	h, err := b.health()
	if err != nil {
		t.Fatal(err)
	}
	if h["fsync"] != "never" || h["node_id"] != float64(7) {
		t.Fatalf("/healthz fsync %v node_id %v, want never and 7 from the environment", h["fsync"], h["node_id"])
	}
	if _, err := os.Stat(filepath.Join(dir, layout.MetaFile)); err != nil {
		t.Fatalf("RINGLOG_DATA_DIR not used: %v", err)
	}

	ctx := testContext(t, 30*time.Second)
	prod := b.client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("env"))
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Value: testValue(i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(ctx, t, b.addr, "env", len(recs))
	for i, r := range got {
		if err := sameRecord(recs[i], r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// noURingEnv, set, makes the test binary a wrapper (see TestMain): it
// execs the command after "--" with the io_uring syscalls failing with
// ENOSYS, as on a kernel without io_uring or under a container runtime's
// seccomp profile.
const noURingEnv = "RINGLOG_TEST_NO_IOURING_EXEC"

// execWithoutIOUring is the wrapper's body; it returns only on failure.
func execWithoutIOUring() error {
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	if len(args) == 0 || args[0] == os.Args[0] {
		return errors.New(`no command after "--"`)
	}
	// The filter binds the calling thread, which execve then becomes.
	runtime.LockOSThread()
	if err := denyIOUring(); err != nil {
		return err
	}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, noURingEnv+"=") {
			env = append(env, e)
		}
	}
	return syscall.Exec(args[0], args, env)
}

// denyIOUring installs a seccomp filter on this thread that fails
// io_uring_setup, io_uring_enter and io_uring_register with ENOSYS.
func denyIOUring() error {
	const (
		prSetNoNewPrivs = 38
		seccompFilter   = 2    // SECCOMP_MODE_FILTER
		ldAbs           = 0x20 // BPF_LD | BPF_W | BPF_ABS
		jeq             = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
		ret             = 0x06 // BPF_RET | BPF_K
		retAllow        = 0x7fff0000
		retErrno        = 0x00050000
		archX86_64      = 0xc000003e // AUDIT_ARCH_X86_64
		ioURingSetup    = 425        // then _enter 426, _register 427
	)
	// Jump offsets count from the next instruction: 7 is the ENOSYS return.
	prog := []syscall.SockFilter{
		{Code: ldAbs, K: 4},                               // 0: seccomp_data.arch
		{Code: jeq, Jt: 0, Jf: 4, K: archX86_64},          // 1: another ABI: allow
		{Code: ldAbs, K: 0},                               // 2: seccomp_data.nr
		{Code: jeq, Jt: 3, Jf: 0, K: ioURingSetup},        // 3
		{Code: jeq, Jt: 2, Jf: 0, K: ioURingSetup + 1},    // 4
		{Code: jeq, Jt: 1, Jf: 0, K: ioURingSetup + 2},    // 5
		{Code: ret, K: retAllow},                          // 6
		{Code: ret, K: retErrno | uint32(syscall.ENOSYS)}, // 7
	}
	fprog := syscall.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return e
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_SECCOMP, seccompFilter, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return e
	}
	runtime.KeepAlive(prog)
	return nil
}

// TestIOFlagWithoutIOUring runs the broker on a "host" without io_uring:
// --io uring must refuse to start naming the flag (not the engine's
// Config.IOMode), and --io auto must fall back to sync and say why in
// /healthz io_reason.
func TestIOFlagWithoutIOUring(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the seccomp filter is written for amd64, not %s", runtime.GOARCH)
	}
	prefix := []string{"env", noURingEnv + "=1", os.Args[0], "--"}

	t.Run("uring refused", func(t *testing.T) {
		b := &brokerProc{t: t, dataDir: t.TempDir(), addr: freePort(t), admin: freePort(t), prefix: prefix}
		b.args = []string{"serve", "--listen", b.addr, "--admin-listen", b.admin, "--data-dir", b.dataDir, "--io", "uring"}
		b.launch()
		t.Cleanup(b.stop)
		select {
		case <-b.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("broker still running with --io uring and no io_uring:\n%s", b.out.String())
		}
		var ee *exec.ExitError
		if !errors.As(b.exitErr, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("exit %v, want a non-zero exit:\n%s", b.exitErr, b.out.String())
		}
		out := b.out.String()
		if !strings.Contains(out, "--io uring") || !strings.Contains(out, "--io auto") || strings.Contains(out, "IOMode") {
			t.Fatalf("error does not name the --io flag (or still names IOMode):\n%s", out)
		}
		if !strings.Contains(out, "not implemented") {
			t.Fatalf("error does not say why io_uring is unusable:\n%s", out)
		}
	})

	t.Run("auto falls back", func(t *testing.T) {
		b := &brokerProc{t: t, dataDir: t.TempDir(), addr: freePort(t), admin: freePort(t), prefix: prefix}
		b.args = []string{"serve", "--listen", b.addr, "--admin-listen", b.admin, "--data-dir", b.dataDir, "--io", "auto"}
		b.launch()
		t.Cleanup(b.stop)
		// Not waitReady: it insists on the suite's io path, and this
		// broker cannot run uring.
		deadline := time.Now().Add(30 * time.Second)
		var h map[string]any
		for {
			select {
			case <-b.exited:
				t.Fatalf("broker exited: %v\n%s", b.exitErr, b.out.String())
			default:
			}
			var err error
			if h, err = b.health(); err == nil && h["status"] == "ok" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker not ready:\n%s", b.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		reason, _ := h["io_reason"].(string)
		if h["io_path"] != "sync" || !strings.Contains(reason, "io_uring unavailable") || !strings.Contains(reason, "not implemented") {
			t.Fatalf("/healthz io_path %v io_reason %q, want sync and why io_uring is unavailable", h["io_path"], reason)
		}
		cl := b.client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fallback"))
		if err := cl.ProduceSync(testContext(t, 20*time.Second), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce on the sync fallback: %v", err)
		}
	})
}

// TestServeMaxProcs: --max-procs sets the broker's GOMAXPROCS, /healthz
// reports it beside the CPUs, and a negative count is refused by name.
func TestServeMaxProcs(t *testing.T) {
	b := startBroker(t, t.TempDir(), "--max-procs", "1")
	h, err := b.health()
	if err != nil {
		t.Fatal(err)
	}
	if h["max_procs"] != float64(1) || h["num_cpu"] != float64(runtime.NumCPU()) {
		t.Fatalf("/healthz max_procs %v num_cpu %v, want 1 and %d", h["max_procs"], h["num_cpu"], runtime.NumCPU())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, code := runRinglogCode(t, ctx, "serve", "--max-procs", "-1", "--data-dir", t.TempDir(),
		"--listen", freePort(t), "--admin-listen", freePort(t))
	if code == 0 || !strings.Contains(out, "--max-procs -1") {
		t.Fatalf("serve --max-procs -1: exit %d\n%s", code, out)
	}
}
