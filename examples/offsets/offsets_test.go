package offsets

import (
	"path/filepath"
	"testing"

	"github.com/ringlog/ringlog/examples/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestApplyReplay: a redelivered record changes the naive counter twice
// and the idempotent destination once, and the state survives reopening
// the database file (what the walkthrough's restarted consumer sees).
func TestApplyReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "practice.db")
	s, err := sink.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(off int64, key, value string) *kgo.Record {
		return &kgo.Record{Topic: Topic, Partition: 0, Offset: off, Key: []byte(key), Value: []byte(value)}
	}
	steps := []struct {
		r    *kgo.Record
		want bool // the idempotent destination ran the change
	}{
		{rec(39, "filler-39", "filler"), true}, // another key: no effect at all
		{rec(40, Key, "completed rehearsal"), true},
		{rec(41, Key, "practice point"), true},
		{rec(41, Key, "practice point"), false}, // the replay after the crash
		{rec(42, Key, "saved reflection"), true},
	}
	for i, st := range steps {
		applied, err := apply(s, st.r)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if applied != st.want {
			t.Fatalf("step %d (offset %d): applied=%v, want %v", i, st.r.Offset, applied, st.want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (State{Rehearsals: 1, Points: 1, NaivePoints: 2, Reflections: 1}); got != want {
		t.Fatalf("state %v, want %v", got, want)
	}
}
