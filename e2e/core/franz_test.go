package core

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFranzGoProduceConsumeAllCodecs(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir(), "--fsync", "always")
	ctx := harness.Context(t, 90*time.Second)

	adm := kadm.NewClient(b.Client(t))
	const partitions = 16
	codecs := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			prod := b.Client(t, kgo.ProducerBatchCompression(codec), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond))
			const n = 2000
			sent := make(map[string]*kgo.Record, n)
			var wg sync.WaitGroup
			var mu sync.Mutex
			baseTS := time.UnixMilli(1_700_000_000_000)
			for i := 0; i < n; i++ {
				r := &kgo.Record{
					Topic:     topic,
					Key:       []byte(fmt.Sprintf("key-%d", i%37)),
					Value:     bytes.Repeat([]byte(fmt.Sprintf("value-%06d|", i)), 1+i%20),
					Timestamp: baseTS.Add(time.Duration(i) * time.Millisecond),
					Headers:   []kgo.RecordHeader{{Key: "seq", Value: []byte(fmt.Sprint(i))}, {Key: "codec", Value: []byte(name)}},
				}
				sent[fmt.Sprint(i)] = r
				wg.Add(1)
				prod.Produce(ctx, r, func(r *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						mu.Lock()
						t.Errorf("produce: %v", err)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			got := harness.ConsumeAll(ctx, t, b.Addr, topic, n)
			if len(got) != n {
				t.Fatalf("got %d records, want %d", len(got), n)
			}
			lastOffset := map[int32]int64{}
			lastSeqByKey := map[string]int{}
			for _, r := range got {
				seq := string(r.Headers[0].Value)
				want, ok := sent[seq]
				if !ok {
					t.Fatalf("unexpected record seq %q", seq)
				}
				if !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) {
					t.Fatalf("record %s: key/value mismatch", seq)
				}
				if !r.Timestamp.Equal(want.Timestamp) {
					t.Fatalf("record %s: timestamp %v, want %v", seq, r.Timestamp, want.Timestamp)
				}
				if len(r.Headers) != 2 || string(r.Headers[1].Value) != name {
					t.Fatalf("record %s: headers %v", seq, r.Headers)
				}
				if prev, ok := lastOffset[r.Partition]; ok && r.Offset != prev+1 {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
				}
				lastOffset[r.Partition] = r.Offset
				// Same key -> same partition, and order within it holds.
				var i int
				fmt.Sscan(seq, &i)
				if prev, ok := lastSeqByKey[string(r.Key)]; ok && i < prev {
					t.Fatalf("key %s: seq %d after %d", r.Key, i, prev)
				}
				lastSeqByKey[string(r.Key)] = i
				delete(sent, seq)
			}
			if len(lastOffset) < partitions/2 {
				t.Fatalf("records landed in only %d partitions", len(lastOffset))
			}
		})
	}
}

func TestAdminTopicLifecycle(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir(), "--auto-create-topics=false")
	ctx := harness.Context(t, 30*time.Second)
	adm := kadm.NewClient(b.Client(t))

	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "segment.bytes": kadm.StringPtr("1048576")}, "life")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "life"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bad/name"); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, "cfgbad"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("bad config: %v, want INVALID_CONFIG", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf3 on one broker: %v, want INVALID_REPLICATION_FACTOR", err)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("life", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sawRetention bool
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			sawRetention = true
			if c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Fatalf("retention.ms = %q source %v", c.MaybeValue(), c.Source)
			}
		}
		if c.Key == "cleanup.policy" && c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("cleanup.policy source %v, want default", c.Source)
		}
	}
	if !sawRetention {
		t.Fatal("retention.ms missing from DescribeConfigs")
	}

	if _, err := adm.CreatePartitions(ctx, 2, "life"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["life"].Partitions); n != 5 {
		t.Fatalf("partitions after CreatePartitions: %d, want 5", n)
	}
	// Fewer partitions than now is refused.
	shrink, err := adm.UpdatePartitions(ctx, 2, "life")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(shrink["life"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking partitions: %v, want INVALID_PARTITIONS", shrink["life"].Err)
	}

	// With auto-create off, producing to an unknown topic fails with
	// UNKNOWN_TOPIC_OR_PARTITION (a client retries that, then gives up),
	// and neither Metadata asking for creation nor Produce creates it.
	prod := b.Client(t, kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(3*time.Second), kgo.AllowAutoTopicCreation())
	err = prod.ProduceSync(ctx, &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to unknown topic with auto-create off: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// Raw Metadata: kadm caches metadata, and this must ask the broker.
	unknownCode := func() int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("nope")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, prod)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 {
			t.Fatalf("metadata for one topic answered %d", len(resp.Topics))
		}
		return resp.Topics[0].ErrorCode
	}
	if code := unknownCode(); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata for unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if code := produceRaw(t, prod, "nope", harness.EncodeBatch(1, []byte("x"))); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("raw produce to unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if code := unknownCode(); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("after a produce with auto-create off, metadata for the topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}

	if _, err := adm.DeleteTopics(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	td, err = adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td.Has("life") {
		t.Fatal("topic still listed after delete")
	}

	cluster, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cluster.Brokers) != 1 || cluster.Cluster == "" {
		t.Fatalf("metadata brokers %v cluster %q", cluster.Brokers, cluster.Cluster)
	}
}

func TestRestartKeepsDataAndClusterID(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted, serve's shutdown log
	dir := t.TempDir()
	b := harness.StartBroker(t, dir)
	ctx := harness.Context(t, 60*time.Second)
	// The topic is created by the broker on first use (franz-go asks for
	// that explicitly).
	prod := b.Client(t, kgo.AllowAutoTopicCreation())
	for i := 0; i < 500; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "keep", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	h1, _ := b.Health()
	prod.Close()
	b.Stop()
	if !strings.Contains(b.Out.String(), "clean shutdown complete") {
		t.Fatalf("no clean shutdown line in log:\n%s", b.Out.String())
	}
	b.Restart()
	h2, _ := b.Health()
	if h1["cluster_id"] != h2["cluster_id"] {
		t.Fatalf("cluster id changed across restart: %v -> %v", h1["cluster_id"], h2["cluster_id"])
	}
	got := harness.ConsumeAll(ctx, t, b.Addr, "keep", 500)
	for i, r := range got {
		if string(r.Value) != fmt.Sprint(i) || r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}
}
