package upload

import (
	"context"
	"testing"
	"time"

	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/s3test"
)

// Against a real S3 server (gofakes3 on loopback, through minio-go): the
// server stops mid-way, produce goes on, uploads resume when it is back.
func TestS3ServerOutage(t *testing.T) {
	srv := s3test.Start(t)
	ak, sk := srv.Credentials()
	store, err := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: srv.Endpoint(), Bucket: srv.Bucket(), AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	c, eng, p := setup(t, nil)
	produce(t, p, 20, 0)
	end, _ := sealedEnd(p)
	cfg := testConfig(1)
	cfg.OpTimeout = time.Second // a stopped server refuses connections at once anyway
	m := New(cfg, eng, store, newMeta(c), nil)
	defer m.Close()
	c.run(m)
	waitFor(t, "the first uploads", func() bool { return c.remoteEnd() == end })

	srv.Stop()
	produce(t, p, 20, 0)
	end, _ = sealedEnd(p)
	waitFor(t, "failures while the server is down", func() bool { return m.Stats().Stalled == 1 })
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the uploads to resume", func() bool { return c.remoteEnd() == end })
	checkContiguous(t, c, store, 0, end)
	if st := m.Stats(); st.Stalled != 0 {
		t.Fatalf("still stalled: %+v", st)
	}
}
