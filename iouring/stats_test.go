package iouring

import "testing"

// TestSQEsPerEnterHistogram: one enter carrying 5 NOPs lands in the 4-7
// bucket, a wait-only enter in bucket 0, and the buckets add up to Enters.
func TestSQEsPerEnterHistogram(t *testing.T) {
	r := newTestRing(t, 16)
	for range 5 {
		PrepNop(r.GetSQE())
	}
	if n, err := r.SubmitAndWait(5); err != nil || n != 5 {
		t.Fatalf("SubmitAndWait: %d, %v", n, err)
	}
	r.CQAdvance(r.CQReady())
	if _, err := r.SubmitAndWait(0); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.SQEsPerEnter[3] != 1 || EnterBucketBound(3) != 7 || EnterBucketBound(2) != 3 {
		t.Fatalf("5 SQEs not in the 4-7 bucket: %v", st.SQEsPerEnter)
	}
	var sum uint64
	for _, n := range st.SQEsPerEnter {
		sum += n
	}
	if sum != st.Enters {
		t.Fatalf("buckets hold %d enters, Stats.Enters %d: %v", sum, st.Enters, st.SQEsPerEnter)
	}
	if EnterBucketBound(EnterBuckets-1) != -1 {
		t.Fatal("last bucket must be unbounded")
	}
}
