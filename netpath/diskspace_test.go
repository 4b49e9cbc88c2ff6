package netpath

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Every way a full disk reaches a client is KAFKA_STORAGE_ERROR, never
// UNKNOWN_SERVER_ERROR.
func TestDiskFullErrorCodes(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: 1 bytes free, need 2", engine.ErrDiskFull),
		fmt.Errorf("not creating topic x: %w", fmt.Errorf("%w: 1 bytes free, need 2", engine.ErrDiskFull)),
		fmt.Errorf("%w: raft: %v", controller.ErrNoSpace, "write failed"),
		fmt.Errorf("mkdir: %w", &os.PathError{Op: "mkdir", Path: "/d/t-0", Err: syscall.ENOSPC}),
	} {
		if got := errorCode(err); got != kerr.KafkaStorageError.Code {
			t.Errorf("errorCode(%v) = %d, want KAFKA_STORAGE_ERROR", err, got)
		}
	}
}
