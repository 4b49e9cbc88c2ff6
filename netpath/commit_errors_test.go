package netpath

import (
	"errors"
	"testing"

	"github.com/ringlog/ringlog/coordinator/group"
)

// commitErrors puts the coordinator's answers (committed partitions only)
// back in request order around the partitions denied for READ.
func TestCommitErrors(t *testing.T) {
	errA := errors.New("a")
	denied := []bool{false, true, false, true, false}
	res := []group.PartitionError{{Err: nil}, {Err: errA}, {Err: nil}}
	got := commitErrors(denied, res, nil)
	want := []error{nil, errTopicAuthz, errA, errTopicAuthz, nil}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("partition %d: %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
	// An error for the whole request answers every partition, denied or not.
	for i, err := range commitErrors(denied, nil, errGroupAuthz) {
		if err != errGroupAuthz {
			t.Fatalf("partition %d: %v, want the request's error", i, err)
		}
	}
}
