package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/s3test"
)

// The reader over the real S3 client and the test S3 server: reads match
// the local log, a stopped server is a storage error saying the store is
// unavailable, reads recover after the restart, and a missing object is
// named.
func TestReadFromS3(t *testing.T) {
	srv := s3test.Start(t)
	ak, sk := srv.Credentials()
	st, err := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: srv.Endpoint(), Bucket: srv.Bucket(), AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOn(t, 1000, nil, st)
	f.produce(60)
	end := f.upload()
	for off := int64(0); off < end; off += 3 {
		loc, err := f.part.Read(off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		want := rangeBytes(t, loc.Data)
		got, err := f.read(off, 1<<20, true)
		if err != nil || len(got) == 0 || !strings.HasPrefix(string(want), string(got)) {
			t.Fatalf("offset %d: %d bytes (%v), not a prefix of the local %d", off, len(got), err, len(want))
		}
	}

	f.openCache(1000)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err = f.reader.Read(ctx, f.tid, 0, 0, 1<<20, true, false)
	if !errors.Is(err, ErrStorage) || !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("store stopped: %v", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := f.read(0, 1<<20, true); err != nil || len(got) == 0 {
		t.Fatalf("after the restart: %d bytes, %v", len(got), err)
	}

	seg := f.segs[1]
	f.openCache(1000)
	if err := st.Delete(ctx, rlm.ObjectKey(&seg, "log")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.read(seg.BaseOffset, 1<<20, true); !errors.Is(err, ErrStorage) || !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), rlm.ObjectKey(&seg, "log")) {
		t.Fatalf("missing object on S3: %v", err)
	}
}
