package netpath

import (
	"reflect"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parseProduceRecords gives every partition the same view ParseSet would,
// although the views share one array: partitions with more batches than
// the room left (and torn or empty ones) must not overwrite each other.
func TestParseProduceRecordsSharedViews(t *testing.T) {
	one := batchtest.Values("a")
	two := append(batchtest.Values("b", "c"), batchtest.Values("d")...)
	three := append(append(batchtest.Values("e"), batchtest.Values("f")...), batchtest.Values("g")...)
	parts := [][][]byte{{one, three, nil}, {two[:len(two)-2], one, two, three}}
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	for ti, ps := range parts {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = []string{"x", "y"}[ti]
		for pi, recs := range ps {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(pi), recs
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	sets := parseProduceRecords(req)
	for ti, ps := range parts {
		for pi, recs := range ps {
			want := records.ParseSet(recs)
			got := sets[ti][pi]
			if len(got.Batches) != len(want.Batches) || (len(want.Batches) > 0 && !reflect.DeepEqual(got.Batches, want.Batches)) ||
				(got.Err == nil) != (want.Err == nil) || got.ErrPos != want.ErrPos {
				t.Fatalf("topic %d partition %d: got %d batches (err %v), want %d (err %v)", ti, pi, len(got.Batches), got.Err, len(want.Batches), want.Err)
			}
		}
	}
}
