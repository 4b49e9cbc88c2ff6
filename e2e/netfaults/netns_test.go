package netfaults

import (
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
)

// inNetnsChild runs test in a private network namespace. In the parent it
// re-executes the test binary for this test only under `unshare -n`,
// waits, relays the child's summary lines and verdict, and returns false;
// in the child it returns true and the caller runs the test body.
func inNetnsChild(t *testing.T) bool {
	t.Helper()
	return harness.InNetnsChildFor(t, 170*time.Second)
}
