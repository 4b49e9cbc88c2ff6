package loadgen

import (
	"math/rand"
	"testing"
)

func TestScheduleIntendedExact(t *testing.T) {
	s := NewSchedule(1000, 3) // 3 msg/s: 333,333,333.33 ns apart
	for i, want := range []int64{1000, 1000 + 333_333_333, 1000 + 666_666_666, 1000 + 1_000_000_000} {
		if got := s.Intended(uint64(i)); got != want {
			t.Fatalf("Intended(%d) = %d, want %d", i, got, want)
		}
	}
	// No drift: after a day at 1M msg/s, message n is exactly n µs after start.
	m := NewSchedule(0, 1_000_000)
	n := uint64(86_400_000_000)
	if got := m.Intended(n); got != int64(n)*1000 {
		t.Fatalf("Intended(%d) = %d, want %d", n, got, int64(n)*1000)
	}
	// Fractional rates stay exact: 2.5 msg/s puts message 5 at exactly 2 s.
	if got := NewSchedule(0, 2.5).Intended(5); got != 2_000_000_000 {
		t.Fatalf("2.5 msg/s: Intended(5) = %d", got)
	}
}

func TestScheduleDueMatchesIntended(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 2000; trial++ {
		rate := 1 + rng.Float64()*2e6
		s := NewSchedule(rng.Int63n(1e9), rate)
		i := uint64(rng.Int63n(1e9))
		at := s.Intended(i)
		// At message i's intended time exactly i+1 messages are due, one ns
		// earlier at most i.
		if got := s.Due(at); got < i+1 || s.Intended(got) <= at {
			t.Fatalf("rate %.3f: Due(Intended(%d)) = %d", rate, i, got)
		}
		if got := s.Due(at - 1); got > i {
			t.Fatalf("rate %.3f: Due(Intended(%d)-1) = %d", rate, i, got)
		}
	}
	if NewSchedule(100, 10).Due(99) != 0 {
		t.Fatal("messages due before the start")
	}
}
