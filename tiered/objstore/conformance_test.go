package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/s3test"
)

// newS3 starts a test server and returns a client for it.
func newS3(t *testing.T, opts ...func(*objstore.S3Config)) (objstore.Store, *s3test.Server) {
	t.Helper()
	srv := s3test.Start(t)
	ak, sk := srv.Credentials()
	cfg := objstore.S3Config{Endpoint: srv.Endpoint(), Bucket: srv.Bucket(), AccessKey: ak, SecretKey: sk}
	for _, o := range opts {
		o(&cfg)
	}
	st, err := objstore.NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st, srv
}

// stores is the table every conformance test runs against: the S3
// client on the test server, the memory store, and the fault wrapper with
// no fault set (which must be transparent).
func stores(t *testing.T) map[string]func(t *testing.T) objstore.Store {
	return map[string]func(t *testing.T) objstore.Store{
		"s3":     func(t *testing.T) objstore.Store { s, _ := newS3(t); return s },
		"memory": func(t *testing.T) objstore.Store { return objstore.NewMemory() },
		"faulty": func(t *testing.T) objstore.Store { return objstore.NewFaulty(objstore.NewMemory()) },
	}
}

// ctxT bounds a test's calls: generous, since -race on a loaded 2-core
// machine made 20 MiB through gofakes3 take over 10 s.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, st objstore.Store, key string, b []byte) {
	t.Helper()
	if err := st.Put(ctxT(t), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func getRange(st objstore.Store, ctx context.Context, key string, off, n int64) ([]byte, error) {
	rc, err := st.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func TestConformance(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			ctx := ctxT(t)
			data := randBytes(1, 100_000)
			put(t, st, "t/0/a.log", data)
			put(t, st, "t/0/b.log", []byte("bee"))
			put(t, st, "t/1/c.log", []byte{})
			put(t, st, "u/d.log", []byte("dee"))

			ranges := []struct{ off, n int64 }{
				{0, -1}, {0, 1}, {0, 100_000}, {1, 10}, {99_999, 1}, {50_000, -1}, {99_999, -1}, {12_345, 0},
			}
			for _, r := range ranges {
				got, err := getRange(st, ctx, "t/0/a.log", r.off, r.n)
				if err != nil {
					t.Fatalf("range %d+%d: %v", r.off, r.n, err)
				}
				end := int64(len(data))
				if r.n >= 0 {
					end = r.off + r.n
				}
				if !bytes.Equal(got, data[r.off:end]) {
					t.Fatalf("range %d+%d: got %d bytes, want %d (or bytes differ)", r.off, r.n, len(got), end-r.off)
				}
			}
			if got, err := getRange(st, ctx, "t/1/c.log", 0, -1); err != nil || len(got) != 0 {
				t.Fatalf("empty object: %q, %v", got, err)
			}

			// Ranges the object does not hold: the metadata that pointed
			// here is wrong, or the object lost bytes.
			for _, r := range []struct{ off, n int64 }{{99_999, 2}, {100_000, 1}, {100_000, -1}, {200_000, 5}, {0, 100_001}} {
				if _, err := getRange(st, ctx, "t/0/a.log", r.off, r.n); !errors.Is(err, objstore.ErrCorrupt) {
					t.Fatalf("range %d+%d past the end: %v, want ErrCorrupt", r.off, r.n, err)
				}
			}
			if _, err := getRange(st, ctx, "t/0/a.log", -1, 5); err == nil {
				t.Fatal("negative offset: no error")
			}

			if fi, err := st.Stat(ctx, "t/0/a.log"); err != nil || fi.Size != 100_000 || fi.Key != "t/0/a.log" {
				t.Fatalf("stat: %+v, %v", fi, err)
			}
			for _, op := range []func() error{
				func() error { _, err := st.Stat(ctx, "t/0/missing"); return err },
				func() error { _, err := st.GetRange(ctx, "t/0/missing", 0, -1); return err },
				func() error { _, err := st.GetRange(ctx, "t/0/missing", 5, 10); return err },
				func() error { _, err := st.GetRange(ctx, "t/0/missing", 0, 0); return err },
			} {
				if err := op(); !errors.Is(err, objstore.ErrNotFound) {
					t.Fatalf("missing key: %v, want ErrNotFound", err)
				}
			}

			list, err := st.List(ctx, "t/")
			if err != nil {
				t.Fatal(err)
			}
			want := []objstore.ObjectInfo{{Key: "t/0/a.log", Size: 100_000}, {Key: "t/0/b.log", Size: 3}, {Key: "t/1/c.log", Size: 0}}
			if fmt.Sprint(list) != fmt.Sprint(want) {
				t.Fatalf("list t/: %v, want %v", list, want)
			}
			if list, err := st.List(ctx, "nothing/"); err != nil || len(list) != 0 {
				t.Fatalf("list of nothing: %v, %v", list, err)
			}

			// Overwrite replaces the whole object.
			put(t, st, "t/0/b.log", []byte("a longer bee"))
			if got, err := getRange(st, ctx, "t/0/b.log", 0, -1); err != nil || string(got) != "a longer bee" {
				t.Fatalf("after overwrite: %q, %v", got, err)
			}

			// A reader shorter than size fails the Put and stores nothing.
			err = st.Put(ctx, "t/short", strings.NewReader("abc"), 10)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("short reader: %v, want io.ErrUnexpectedEOF", err)
			}
			if _, err := st.Stat(ctx, "t/short"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("short put left an object: %v", err)
			}

			if err := st.Delete(ctx, "t/0/a.log"); err != nil {
				t.Fatal(err)
			}
			if err := st.Delete(ctx, "t/0/a.log"); err != nil {
				t.Fatalf("delete of a missing object: %v", err)
			}
			if _, err := st.Stat(ctx, "t/0/a.log"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}

			// A ctx past its deadline is ErrUnavailable: the store did not
			// answer in time.
			dead, cancel := context.WithTimeout(context.Background(), -time.Second)
			defer cancel()
			if _, err := st.Stat(dead, "u/d.log"); !errors.Is(err, objstore.ErrUnavailable) {
				t.Fatalf("expired ctx: %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestConcurrent(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			ctx := ctxT(t)
			const workers, each = 8, 6
			errc := make(chan error, workers)
			for w := 0; w < workers; w++ {
				go func() {
					errc <- func() error {
						for i := 0; i < each; i++ {
							key := fmt.Sprintf("w%d/%03d", w, i)
							data := randBytes(int64(w*100+i), 1000+w*100+i)
							if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
								return err
							}
							got, err := getRange(st, ctx, key, 10, 500)
							if err != nil {
								return err
							}
							if !bytes.Equal(got, data[10:510]) {
								return fmt.Errorf("%s: range bytes differ", key)
							}
							if _, err := st.List(ctx, fmt.Sprintf("w%d/", w)); err != nil {
								return err
							}
							if i%2 == 0 {
								if err := st.Delete(ctx, key); err != nil {
									return err
								}
							}
						}
						return nil
					}()
				}()
			}
			for w := 0; w < workers; w++ {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			all, err := st.List(ctx, "w")
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != workers*each/2 {
				t.Fatalf("%d objects left, want %d", len(all), workers*each/2)
			}
		})
	}
}
