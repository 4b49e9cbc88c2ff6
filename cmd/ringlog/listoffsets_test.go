package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestListOffsetsByTimestamp: ListOffsets with a timestamp answers the
// first record stamped at or after it, inside a compressed batch too,
// plus earliest, latest and max-timestamp (-3).
func TestListOffsetsByTimestamp(t *testing.T) {
	b := startBroker(t, t.TempDir())
	ctx := testContext(t, 30*time.Second)
	adm := kadm.NewClient(b.client(t))
	const topic = "by-time"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// One zstd batch of 10 records, 1 s apart (linger keeps them together).
	prod := b.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(50*time.Millisecond))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if rs[0].Offset != 0 || rs[9].Offset != 9 {
		t.Fatalf("offsets %d..%d", rs[0].Offset, rs[9].Offset)
	}
	for _, c := range []struct {
		after time.Duration
		want  int64
	}{{-time.Second, 0}, {0, 0}, {1500 * time.Millisecond, 2}, {9 * time.Second, 9}, {10 * time.Second, 10}} {
		res, err := adm.ListOffsetsAfterMilli(ctx, base.Add(c.after).UnixMilli(), topic)
		if err != nil || res.Error() != nil {
			t.Fatalf("ListOffsetsAfterMilli: %v %v", err, res.Error())
		}
		lo, _ := res.Lookup(topic, 0)
		if lo.Offset != c.want {
			t.Errorf("first record at or after base%+v: offset %d, want %d", c.after, lo.Offset, c.want)
		}
		if c.want < 10 && lo.Timestamp != base.Add(time.Duration(c.want)*time.Second).UnixMilli() {
			t.Errorf("first record at or after base%+v: timestamp %d, want record %d's", c.after, lo.Timestamp, c.want)
		}
	}
	start, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := start.Lookup(topic, 0)
	e, _ := end.Lookup(topic, 0)
	if s.Offset != 0 || e.Offset != 10 {
		t.Fatalf("earliest %d, latest %d; want 0, 10", s.Offset, e.Offset)
	}
	mx, err := adm.ListMaxTimestampOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := mx.Lookup(topic, 0); m.Offset != 9 || m.Timestamp != rs[9].Timestamp.UnixMilli() {
		t.Fatalf("max timestamp: offset %d at %d, want 9 at %d", m.Offset, m.Timestamp, rs[9].Timestamp.UnixMilli())
	}
}
