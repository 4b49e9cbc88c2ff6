// Package harness is what the end-to-end suites under e2e/ share: it runs
// the real `ringlog serve` binary on loopback (single brokers, clusters,
// brokers in network namespaces), drives it with real clients (franz-go,
// kcat, confluent_kafka over librdkafka), and checks what comes back.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RinglogBin is the broker binary the suites run: RINGLOG_TEST_BIN, or one
// Main builds for the test run.
var RinglogBin string

// Main is every e2e package's TestMain: it builds the binary (unless
// RINGLOG_TEST_BIN names one), runs the tests and cleans up. A test binary
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
	os.Exit(code)
}
