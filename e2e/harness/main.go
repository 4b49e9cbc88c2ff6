// Package harness is what the end-to-end suites under e2e/ share: it runs
// brokers on loopback (single brokers, clusters, brokers in network
// namespaces), as `ringlog serve` processes or in the test process from
// the same serve arguments (inprocess.go), drives them with real clients
// (franz-go, kcat, confluent_kafka over librdkafka), and checks what comes
// back.
package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// RinglogBin is the broker binary the suites run: RINGLOG_TEST_BIN, or one
// Main builds for the test run.
var RinglogBin string

// Main is every e2e package's TestMain (or MainInProcess is): it builds
// the binary (unless RINGLOG_TEST_BIN names one; the client commands run
// it in every suite), runs the tests and cleans up. A test binary
// started with NoURingEnv set is a wrapper that execs the broker with
// io_uring refused instead (see ExecWithoutIOUring).
func Main(m *testing.M) {
	if os.Getenv(NoURingEnv) != "" {
		err := ExecWithoutIOUring()
		fmt.Fprintln(os.Stderr, "exec without io_uring:", err)
		os.Exit(2)
	}
	// Brokers under test get an 8 MiB journal (checkpoints still every
	// MiB): zero-filling the default 64 MiB cost about 60 ms at each of the
	// suites' hundreds of broker starts. The serve-defaults tests unset it.
	if _, ok := os.LookupEnv("RINGLOG_JOURNAL_BYTES"); !ok {
		os.Setenv("RINGLOG_JOURNAL_BYTES", "8388608")
	}
	dir, err := os.MkdirTemp("", "ringlog-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	RinglogBin = filepath.Join(dir, "ringlog")
	if env := os.Getenv("RINGLOG_TEST_BIN"); env != "" {
		RinglogBin = env
	} else {
		build := exec.Command("go", "build", "-o", RinglogBin, "github.com/ringlog/ringlog/cmd/ringlog")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building ringlog:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 && inProcessStarted.Load() {
		if err := brokerGoroutinesGone(10 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// NoURingEnv, set, makes the test binary a wrapper (see TestMain): it
// execs the command after "--" with the io_uring syscalls failing with
// ENOSYS, as on a kernel without io_uring or under a container runtime's
// seccomp profile.
const NoURingEnv = "RINGLOG_TEST_NO_IOURING_EXEC"

// ExecWithoutIOUring is the wrapper's body; it returns only on failure.
func ExecWithoutIOUring() error {
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
	if err := DenyIOUring(); err != nil {
		return err
	}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, NoURingEnv+"=") {
			env = append(env, e)
		}
	}
	return syscall.Exec(args[0], args, env)
}

// DenyIOUring installs a seccomp filter on this thread that fails
// io_uring_setup, io_uring_enter and io_uring_register with ENOSYS.
func DenyIOUring() error {
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
