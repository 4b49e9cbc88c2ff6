package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/tiered/objstore"
)

func TestFaultyOutage(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMemory())
	ctx := ctxT(t)
	put(t, f, "k", []byte("v"))
	f.SetOutage(true)
	if err := f.Put(ctx, "k2", strings.NewReader("v"), 1); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("put in outage: %v", err)
	}
	if _, err := f.GetRange(ctx, "k", 0, -1); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("get in outage: %v", err)
	}
	if _, err := f.List(ctx, ""); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("list in outage: %v", err)
	}
	f.SetOutage(false)
	if got, err := getRange(f, ctx, "k", 0, -1); err != nil || string(got) != "v" {
		t.Fatalf("after outage: %q, %v", got, err)
	}
	if _, err := f.Stat(ctx, "k2"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("put during outage stored something: %v", err)
	}
	if n := f.Calls(objstore.OpPut); n != 2 {
		t.Fatalf("%d puts counted, want 2", n)
	}
}

func TestFaultySkipCountPrefix(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMemory())
	ctx := ctxT(t)
	boom := errors.New("boom")
	in := f.Inject(objstore.Fault{Ops: objstore.OpPut, KeyPrefix: "a/", Skip: 1, Count: 2, Err: boom})
	var errs []bool
	for i := 0; i < 5; i++ {
		err := f.Put(ctx, "a/x", strings.NewReader("v"), 1)
		if err != nil && !errors.Is(err, boom) {
			t.Fatalf("put %d: %v", i, err)
		}
		errs = append(errs, err != nil)
	}
	if want := []bool{false, true, true, false, false}; !equalBools(errs, want) {
		t.Fatalf("failures %v, want %v", errs, want)
	}
	if in.Fired() != 2 {
		t.Fatalf("fired %d", in.Fired())
	}
	// Other keys and other operations pass.
	put(t, f, "b/x", []byte("v"))
	if _, err := f.Stat(ctx, "a/x"); err != nil {
		t.Fatal(err)
	}
	// A fault without Err, latency or corruption fails with ErrUnavailable;
	// Remove stops it.
	in = f.Inject(objstore.Fault{Ops: objstore.OpStat | objstore.OpDelete})
	if _, err := f.Stat(ctx, "a/x"); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("stat: %v", err)
	}
	if err := f.Delete(ctx, "a/x"); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("delete: %v", err)
	}
	in.Remove()
	if _, err := f.Stat(ctx, "a/x"); err != nil {
		t.Fatal(err)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFaultyLatency(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMemory())
	put(t, f, "k", []byte("v"))
	f.Inject(objstore.Fault{Ops: objstore.OpStat, Latency: 50 * time.Millisecond})
	start := time.Now()
	if _, err := f.Stat(ctxT(t), "k"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("latency fault took only %v", d)
	}
	// Latency longer than the ctx allows: the call gives up at the
	// deadline with ErrUnavailable.
	f.Inject(objstore.Fault{Ops: objstore.OpGetRange, Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := f.GetRange(ctx, "k", 0, -1); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("slow get: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("slow get ignored its ctx: %v", d)
	}
}

func TestFaultyCorruptDropRead(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMemory())
	ctx := ctxT(t)
	data := randBytes(9, 4096)
	put(t, f, "k", data)

	f.Inject(objstore.Fault{Ops: objstore.OpGetRange, Corrupt: true, Count: 1})
	got, err := getRange(f, ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(data) || bytes.Equal(got, data) {
		t.Fatalf("corrupt read: %d bytes, equal=%v", len(got), bytes.Equal(got, data))
	}
	if got, _ := getRange(f, ctx, "k", 0, -1); !bytes.Equal(got, data) {
		t.Fatal("corruption outlived its count, or touched the stored object")
	}

	f.Inject(objstore.Fault{Ops: objstore.OpPut, Drop: true, Count: 1})
	put(t, f, "dropped", []byte("gone"))
	if _, err := f.Stat(ctx, "dropped"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("dropped put: %v", err)
	}

	f.Inject(objstore.Fault{Ops: objstore.OpRead, Count: 1})
	rc, err := f.GetRange(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("read fault: %v", err)
	}
	rc.Close()

	if err := f.DropObject(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.GetRange(ctx, "k", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("after DropObject: %v", err)
	}
}

// TestFaultyOverS3: the wrapper composes with the real client (what the
// next round's uploader tests use for errors the server cannot make).
func TestFaultyOverS3(t *testing.T) {
	st, _ := newS3(t)
	f := objstore.NewFaulty(st)
	put(t, f, "k", []byte("value"))
	f.Inject(objstore.Fault{Ops: objstore.OpGetRange, Corrupt: true, Count: 1})
	got, err := getRange(f, ctxT(t), "k", 0, -1)
	if err != nil || string(got) == "value" || len(got) != 5 {
		t.Fatalf("corrupt get over s3: %q, %v", got, err)
	}
}
