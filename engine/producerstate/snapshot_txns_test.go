package producerstate

import (
	"errors"
	"maps"
	"testing"
)

// DecodeSnapshotTxns reads back the open and aborted transactions of a
// snapshot, and refuses a damaged one.
func TestDecodeSnapshotTxns(t *testing.T) {
	a, _ := scenario(t)
	snap := a.s.Snapshot()
	got, err := DecodeSnapshotTxns(snap)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int64]int64{2: 11}; !maps.Equal(got.Ongoing, want) {
		t.Fatalf("ongoing %v, want %v", got.Ongoing, want)
	}
	want := a.s.AbortedTxns(0, 1<<62)
	if len(got.Aborted) != 3 || len(want) != 3 {
		t.Fatalf("aborted %v, state lists %v", got.Aborted, want)
	}
	for i := range want {
		if got.Aborted[i] != want[i] {
			t.Fatalf("aborted %v, want %v", got.Aborted, want)
		}
	}
	snap[len(snap)-1] ^= 1
	if _, err := DecodeSnapshotTxns(snap); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("damaged snapshot: %v", err)
	}
}
