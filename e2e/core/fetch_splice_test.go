package core

import (
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchLargeRangesSplice covers the splice route (ranges of 1 MiB and
// more) end to end: multi-MiB partition responses crossing segment rolls,
// read byte-exact by concurrent consumers on the plaintext (splice and
// sendfile) and TLS (copy) listeners, and the splice counter proves the
// route was taken.
func TestFetchLargeRangesSplice(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	b, certs := harness.StartTLSBroker(t, dataDir, false, "--fsync", "never")
	ctx := harness.Context(t, 180*time.Second)
	const (
		topic      = "splice"
		partitions = 2
		records    = 6000 // ~3 KiB each: ~9 MiB per partition
	)
	adm := kadm.NewClient(b.Client(t))
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"segment.bytes": kadm.StringPtr("4194304")}, topic); err != nil {
		t.Fatal(err)
	}
	prod := b.Client(t, kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	want := produceRecords(ctx, t, prod, topic, records)
	if segs := countSegments(t, dataDir, topic); segs < 2*partitions {
		t.Fatalf("only %d segments: the test needs segment rolls", segs)
	}
	// 3 MiB and 5 MiB per partition: ranges past spliceMinBytes that end
	// inside segments and at their ends.
	consumeExactOnBothListeners(ctx, t, b, certs, topic, partitions, want, records, 2, func(i int) (int32, int32) {
		maxPart := int32(3<<20) + int32(i)*(2<<20)
		return maxPart, 2 * maxPart
	})
	m := b.Metrics(t)
	spliced := fetchBytes(m, "plaintext", "splice")
	if spliced < 1<<20 {
		t.Errorf("plaintext splice bytes %v: the large ranges did not take the splice route", spliced)
	}
	if v := fetchBytes(m, "tls", "zero-copy"); v != 0 {
		t.Errorf("tls zero-copy bytes %v, want 0", v)
	}
	h, err := b.Health()
	if err != nil {
		t.Fatal(err)
	}
	if s := h["stats"].(map[string]any)["spliced_bytes"].(float64); s != spliced {
		t.Errorf("/healthz spliced_bytes %v, /metrics %v", s, spliced)
	}
	t.Logf("splice carried %.1f MiB on the plaintext listener", spliced/(1<<20))
}
