package broker

// Proposed by WIRE for after the merge of upload + read (it fails on the
// wire branch alone, where upload.Manager and remote.Reader are the
// contract's placeholders). Passed in 1.3 s on wire+upload(5bd0c4d)+read(54724eb).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/tiered/s3test"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// One broker end to end: sealed segments of a remote-storage topic are
// uploaded and committed, local retention then deletes them, and a
// consumer from offset 0 reads every record back (below the local log
// start through the remote reader and the chunk cache), counted by the
// remote metrics.
func TestTieredBrokerEndToEnd(t *testing.T) {
	s3 := s3test.Start(t)
	cfg, _ := lifecycleConfig(t)
	ak, sk := s3.Credentials()
	cfg.Tiered.S3.Endpoint, cfg.Tiered.S3.Bucket = s3.Endpoint(), s3.Bucket()
	cfg.Tiered.S3.AccessKey, cfg.Tiered.S3.SecretKey = ak, sk
	cfg.Tiered.Upload.Interval = 100 * time.Millisecond
	cfg.Engine.RetentionCheckInterval = 100 * time.Millisecond
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	deadline, _ := ctx.Deadline()
	defer cancel()
	adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes": kadm.StringPtr("16384"), "local.retention.bytes": kadm.StringPtr("1")}, "tiered"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.DefaultProduceTopic("tiered"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 300
	value := func(i int) string { return fmt.Sprintf("value-%06d-%0990d", i, i) }
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var body []byte
	if !testwait.Until(time.Until(deadline), func() bool {
		var doc remoteSegmentsDoc
		_, body = adminGet(t, b, "/v1/remote/segments?topic=tiered")
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		p := doc.Partitions[0]
		return p.LocalLogStart > n/2 && p.RemoteLogStart == 0 && p.RemoteEnd >= p.LocalLogStart
	}) {
		t.Fatalf("no upload and local deletion: %s", body)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.ConsumeTopics("tiered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != value(got) || r.Offset != int64(got) {
				t.Fatalf("record %d at offset %d: %.20q", got, r.Offset, r.Value)
			}
			got++
		})
	}
	if got != n {
		t.Fatalf("consumed %d of %d", got, n)
	}
	_, m := adminGet(t, b, "/metrics")
	for _, zero := range []string{"\nringlog_remote_segments_uploaded_total 0\n", "\nringlog_remote_fetch_requests_total 0\n", "\nringlog_remote_cache_fetched_bytes_total 0\n"} {
		if strings.Contains(string(m), zero) {
			t.Errorf("metrics: %q", strings.TrimSpace(zero))
		}
	}
}
