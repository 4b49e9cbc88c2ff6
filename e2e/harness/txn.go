package harness

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnBrokerArgs keep the internal topics small and groups quick.
var TxnBrokerArgs = []string{
	"--transaction-state-partitions", "5",
	"--offsets-topic-partitions", "5",
	"--group-initial-rebalance-delay", "100ms",
}

func TxnClient(t *testing.T, seeds []string, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.TransactionTimeout(20 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// WaitStable waits until no transaction is open on topic: every
// partition's last stable offset is its high watermark. EndTxn answers
// before the markers are written, so this is how a test knows the outcome
// reached the partitions.
func WaitStable(ctx context.Context, t *testing.T, seeds []string, topic string) {
	t.Helper()
	adm := kadm.NewClient(NewClient(t, seeds))
	for {
		lso, err1 := adm.ListCommittedOffsets(ctx, topic)
		hw, err2 := adm.ListEndOffsets(ctx, topic)
		if err1 == nil && err2 == nil && lso.Error() == nil && hw.Error() == nil {
			same := true
			hw.Each(func(o kadm.ListedOffset) {
				if l, ok := lso.Lookup(topic, o.Partition); !ok || l.Offset != o.Offset {
					same = false
				}
			})
			if same {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still has open transactions: last stable offsets %v, high watermarks %v", topic, lso, hw)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func NewClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
