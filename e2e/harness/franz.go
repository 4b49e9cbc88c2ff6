package harness

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeAll reads topic from the start until want records arrived or ctx
// ends.
func ConsumeAll(ctx context.Context, t *testing.T, addr, topic string, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(out), want)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch error %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}
