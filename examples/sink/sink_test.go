package sink

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var points = []byte("practice")

// addPoint is the naive, non-idempotent effect of the design example: it
// adds one point every time it runs.
func addPoint(tx *bolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(points)
	if err != nil {
		return err
	}
	var n uint64
	if v := b.Get([]byte("points")); v != nil {
		n = binary.BigEndian.Uint64(v)
	}
	return b.Put([]byte("points"), binary.BigEndian.AppendUint64(nil, n+1))
}

func countPoints(t *testing.T, s *Sink) uint64 {
	t.Helper()
	var n uint64
	if err := s.DB().View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(points); b != nil {
			if v := b.Get([]byte("points")); v != nil {
				n = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func open(t *testing.T, path string) *Sink {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApplyTwiceOneEffect(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.db"))
	defer s.Close()
	id := EventID("practice-events", 0, 41)
	if id != "practice-events/0/41" {
		t.Fatal(id)
	}
	for i, want := range []bool{true, false} {
		applied, err := s.Apply(id, addPoint)
		if err != nil || applied != want {
			t.Fatalf("apply %d: applied=%v err=%v", i, applied, err)
		}
	}
	if n := countPoints(t, s); n != 1 {
		t.Fatalf("points %d", n)
	}
	if seen, _ := s.Seen(id); !seen {
		t.Fatal("not seen")
	}
	if seen, _ := s.Seen("other"); seen {
		t.Fatal("other seen")
	}
	if _, err := s.Apply("", addPoint); !errors.Is(err, ErrEmptyEventID) {
		t.Fatal(err)
	}
}

func TestFailedChangeIsNotRecorded(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.db"))
	defer s.Close()
	boom := errors.New("boom")
	applied, err := s.Apply("e1", func(tx *bolt.Tx) error {
		if err := addPoint(tx); err != nil {
			return err
		}
		return boom // the half-done change rolls back with the marker
	})
	if applied || !errors.Is(err, boom) {
		t.Fatal(applied, err)
	}
	if seen, _ := s.Seen("e1"); seen || countPoints(t, s) != 0 {
		t.Fatal("failed change left a trace")
	}
	if applied, err := s.Apply("e1", addPoint); !applied || err != nil || countPoints(t, s) != 1 {
		t.Fatal("retry not applied")
	}
}

func TestConcurrentApplySameID(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.db"))
	defer s.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied, err := s.Apply("same", addPoint)
			if err != nil {
				t.Error(err)
			}
			if applied {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 || countPoints(t, s) != 1 {
		t.Fatalf("wins %d points %d", wins, countPoints(t, s))
	}
}

// The crash test runs the consumer in a child process (this test binary
// again) that SIGKILLs itself after the database change of offset 41 and
// before committing offset 42, then replays from the committed offset in
// the parent, as a restarted consumer group member would.
const (
	envDB   = "RINGLOG_SINK_CRASH_DB"
	envMode = "RINGLOG_SINK_CRASH_MODE"
)

func committedPath(db string) string { return db + ".committed" }

// commitOffset stands in for OffsetCommit: the next offset to read.
func commitOffset(db string, next int64) error {
	return os.WriteFile(committedPath(db), []byte(strconv.FormatInt(next, 10)), 0o600)
}

// process applies one event; naive mode writes the marker in a second
// transaction, the pattern the package doc warns about.
func process(s *Sink, mode string, offset int64, crashBetween bool) error {
	id := EventID("practice-events", 0, offset)
	if mode == "atomic" {
		_, err := s.Apply(id, addPoint)
		return err
	}
	if seen, err := s.Seen(id); err != nil || seen {
		return err
	}
	if err := s.DB().Update(addPoint); err != nil {
		return err
	}
	if crashBetween {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	_, err := s.Apply(id, func(*bolt.Tx) error { return nil })
	return err
}

func TestCrashChild(t *testing.T) {
	db, mode := os.Getenv(envDB), os.Getenv(envMode)
	if db == "" {
		t.Skip("helper for TestCrashBetweenChangeAndOffsetCommit")
	}
	s, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := process(s, mode, 40, false); err != nil {
		t.Fatal(err)
	}
	if err := commitOffset(db, 41); err != nil {
		t.Fatal(err)
	}
	// Offset 41: the change lands (naive mode: without its marker), then
	// the process dies before the offset commit.
	if err := process(s, mode, 41, mode == "naive"); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

func TestCrashBetweenChangeAndOffsetCommit(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		wantPoints uint64
	}{
		{"atomic", 3}, // 40, 41 and 42 once each
		{"naive", 4},  // the marker gap applies 41 twice
	} {
		t.Run(tc.mode, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "sink.db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), envDB+"="+db, envMode+"="+tc.mode)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
			}
			b, err := os.ReadFile(committedPath(db))
			if err != nil {
				t.Fatal(err)
			}
			next, _ := strconv.ParseInt(string(b), 10, 64)
			if next != 41 {
				t.Fatalf("committed %d", next)
			}
			s := open(t, db)
			defer s.Close()
			if n := countPoints(t, s); n != 2 {
				t.Fatalf("after crash: %d points", n)
			}
			// Restart at the committed offset: 41 is delivered again.
			for off := next; off <= 42; off++ {
				if err := process(s, tc.mode, off, false); err != nil {
					t.Fatal(err)
				}
			}
			if n := countPoints(t, s); n != tc.wantPoints {
				t.Fatalf("after replay: %d points, want %d", n, tc.wantPoints)
			}
		})
	}
}

func TestApplyOffsetHighWater(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.db"))
	defer s.Close()
	if _, ok, _ := s.HighWater("t", 0); ok {
		t.Fatal("mark before any apply")
	}
	for _, off := range []int64{40, 41, 40, 41, 42} { // a replay of 40-41
		if _, err := s.ApplyOffset("t", 0, off, addPoint); err != nil {
			t.Fatal(err)
		}
	}
	if n := countPoints(t, s); n != 3 {
		t.Fatalf("points %d", n)
	}
	if hw, ok, _ := s.HighWater("t", 0); !ok || hw != 42 {
		t.Fatal(hw, ok)
	}
	if applied, _ := s.ApplyOffset("t", 1, 0, addPoint); !applied {
		t.Fatal("partitions have separate marks")
	}
}

func TestPruneBefore(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return now }
	s, err := OpenConfig(filepath.Join(t.TempDir(), "sink.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		if _, err := s.Apply("old-"+strconv.Itoa(i), addPoint); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	if _, err := s.Apply("new", addPoint); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneBefore(now.Add(-time.Minute))
	if err != nil || n != 5 {
		t.Fatal(n, err)
	}
	if seen, _ := s.Seen("old-3"); seen {
		t.Fatal("pruned id still seen")
	}
	if seen, _ := s.Seen("new"); !seen {
		t.Fatal("recent id pruned")
	}
	if n, _ := s.PruneBefore(now.Add(-time.Minute)); n != 0 {
		t.Fatal("second prune found", n)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("zero Config must not validate")
	}
}
