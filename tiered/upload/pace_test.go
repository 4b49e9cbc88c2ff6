package upload

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

func TestPacerSchedule(t *testing.T) {
	p := newPacer(1 << 20) // 1 MiB/s
	now := time.Unix(1000, 0)
	if w := p.reserve(now, 256<<10); w != 0 {
		t.Fatalf("first reservation waits %v", w)
	}
	// The next 256 KiB starts a quarter second later, for any caller.
	if w := p.reserve(now, 256<<10); w != 250*time.Millisecond {
		t.Fatalf("second reservation waits %v, want 250ms", w)
	}
	if w := p.reserve(now.Add(100*time.Millisecond), 512<<10); w != 400*time.Millisecond {
		t.Fatalf("third reservation waits %v, want 400ms", w)
	}
	// Idle time earns no burst: after a long pause the schedule restarts now.
	later := now.Add(time.Hour)
	if w := p.reserve(later, 256<<10); w != 0 {
		t.Fatalf("after idle: waits %v", w)
	}
	if w := p.reserve(later, 1); w != 250*time.Millisecond {
		t.Fatalf("after idle, second: waits %v", w)
	}
	if newPacer(0) != nil || newPacer(-1) != nil {
		t.Fatal("rate <= 0 must mean no pacing")
	}
	var np *pacer
	r := bytes.NewReader([]byte("x"))
	if np.reader(context.Background(), r) != io.Reader(r) {
		t.Fatal("a nil pacer must not wrap")
	}
}

func TestPacedReaderRateAndCancel(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 1<<20)
	p := newPacer(4 << 20) // 1 MiB at 4 MiB/s: about 0.25 s after the first chunk
	start := time.Now()
	got, err := io.ReadAll(p.reader(context.Background(), bytes.NewReader(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	// Three chunks wait 1/16 s each at least; a lower bound only (sleeps
	// never end early), so the check cannot flake on a slow machine.
	if d := time.Since(start); d < 3*(time.Second/16) {
		t.Fatalf("1 MiB at 4 MiB/s took %v: not paced", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	slow := newPacer(1) // a byte a second: the second read waits
	r := slow.reader(ctx, bytes.NewReader(data))
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		read <- err
	}()
	// It waits ten seconds for its ten bytes: no answer in 20 ms, and
	// the cancel ends the wait long before the ten seconds.
	select {
	case err := <-read:
		t.Fatalf("paced read answered (%v) before its time", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-read:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled read still waiting after 5 s")
	}
}
