package harness

import (
	"context"
	"errors"
	"os/exec"
	"testing"
)

// RunRinglogCode runs the ringlog binary with args and returns its combined
// output and exit status.
func RunRinglogCode(t *testing.T, ctx context.Context, args ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, RinglogBin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("ringlog %v: %v\n%s", args, err, out)
	return "", -1
}
