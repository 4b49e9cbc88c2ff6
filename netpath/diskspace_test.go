package netpath

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/ringlog/ringlog/coordinator"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Every way a full disk reaches a client is KAFKA_STORAGE_ERROR, never
// UNKNOWN_SERVER_ERROR.
func TestDiskFullErrorCodes(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: 1 bytes free, need 2", engine.ErrDiskFull),
		fmt.Errorf("not creating topic x: %w", fmt.Errorf("%w: 1 bytes free, need 2", engine.ErrDiskFull)),
		fmt.Errorf("%w: raft: %v", coordinator.ErrNoSpace, "write failed"),
		fmt.Errorf("mkdir: %w", &os.PathError{Op: "mkdir", Path: "/d/t-0", Err: syscall.ENOSPC}),
	} {
		if got := errorCode(err); got != kerr.KafkaStorageError.Code {
			t.Errorf("errorCode(%v) = %d, want KAFKA_STORAGE_ERROR", err, got)
		}
	}
}

// A lasting reconcile failure is logged once a minute, not on every
// metadata change; a new failure and the recovery are logged at once.
func TestReconcileErrLog(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
	var l reconcileErrLog
	full := errors.New("mkdir t-0: no space left on device")
	for range 100 {
		l.report(s, full)
	}
	l.report(s, errors.New("another failure"))
	l.report(s, nil)
	l.report(s, nil)
	out := buf.String()
	if n := strings.Count(out, "no space left on device"); n != 1 {
		t.Fatalf("the same failure logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "another failure") || strings.Count(out, "succeeded again") != 1 {
		t.Fatalf("new failure or recovery not logged once:\n%s", out)
	}
}
