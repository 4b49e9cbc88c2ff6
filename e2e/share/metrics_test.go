package share

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareGroupMetrics scrapes /metrics around a share group's life: a
// consumer that acquires records and sits on them shows as members and
// acquired in-flight records, its locks (4 s) expire into lock timeouts
// and available records, and a second consumer that releases some
// records once and rejects one moves redeliveries and archived records;
// once everything is accepted nothing is in flight.
func TestShareGroupMetrics(t *testing.T) {
	b := harness.StartBroker(t, filepath.Join(t.TempDir(), "data"))
	const topic, group, n = "metered", "mg", 40
	adm := harness.NewClient(t, []string{b.Addr})
	if _, err := kadm.NewClient(adm).CreateTopic(harness.Context(t, 10*time.Second), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setGroupConfigs(t, adm, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "4000")
	harness.ProduceN(t, adm, topic, n)

	series := func(m map[string]float64, name string, labels ...string) float64 {
		v, _ := harness.SumSeries(m, name, append([]string{`group="` + group + `"`}, labels...)...)
		return v
	}
	const (
		members     = "ringlog_share_group_members"
		inFlight    = "ringlog_share_group_in_flight_records"
		delivered   = "ringlog_share_group_delivered_records_total"
		redelivered = "ringlog_share_group_redelivered_records_total"
		timeouts    = "ringlog_share_group_lock_timeouts_total"
		archived    = "ringlog_share_group_archived_records_total"
	)

	staller := shareClient(t, b.Addr, group, topic, kgo.ShareMaxRecords(10))
	defer staller.Close()
	held := 0
	ctx := harness.Context(t, 20*time.Second)
	for held == 0 && ctx.Err() == nil {
		held += len(staller.PollFetches(ctx).Records())
	}
	if held == 0 {
		t.Fatal("the staller got no records")
	}
	// The staller may have fetched ahead of what it polled, so it holds
	// at least what it returned.
	harness.Eventually(t, 10*time.Second, "one member, the staller's records acquired", func() (bool, string) {
		m := b.Metrics(t)
		return series(m, members) == 1 && series(m, inFlight, `state="acquired"`) >= float64(held) && series(m, delivered) >= float64(held),
			fmt.Sprintf("members %v, acquired %v, delivered %v; staller holds %d", series(m, members), series(m, inFlight, `state="acquired"`), series(m, delivered), held)
	})
	harness.Eventually(t, 10*time.Second, "the staller's locks expired", func() (bool, string) {
		m := b.Metrics(t)
		return series(m, timeouts) >= float64(held), fmt.Sprintf("lock timeouts %v, want >= %d", series(m, timeouts), held)
	})

	// The worker releases every key divisible by 10 on its first delivery
	// and rejects key 7; it accepts the rest.
	worker := shareClient(t, b.Addr, group, topic, kgo.ShareMaxRecords(10))
	defer worker.Close()
	accepted := map[int]bool{}
	ctx = harness.Context(t, 40*time.Second)
	for len(accepted) < n-1 && ctx.Err() == nil {
		for _, r := range worker.PollFetches(ctx).Records() {
			k, _ := strconv.Atoi(string(r.Key))
			switch {
			case k == 7:
				r.Ack(kgo.AckReject)
			case k%10 == 0 && r.DeliveryCount() == 1:
				r.Ack(kgo.AckRelease)
			default:
				r.Ack(kgo.AckAccept)
				accepted[k] = true
			}
		}
		if err := worker.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(accepted) < n-1 {
		t.Fatalf("%d of %d records accepted", len(accepted), n-1)
	}
	// Released: 4 keys (0, 10, 20, 30), unless the staller had them; each
	// held record came back after its lock: at least max(held, 4)
	// redeliveries (the staller may have fetched more than it returned).
	// Every record was delivered once, so the deliveries are n plus the
	// redeliveries.
	harness.Eventually(t, 10*time.Second, "the counters moved and nothing is in flight", func() (bool, string) {
		m := b.Metrics(t)
		ok := series(m, members) == 2 &&
			series(m, redelivered) >= float64(max(held, 4)) &&
			series(m, archived) >= 1 &&
			series(m, delivered) == n+series(m, redelivered) &&
			series(m, inFlight, `state="acquired"`) == 0 && series(m, inFlight, `state="available"`) == 0
		return ok, fmt.Sprintf("members %v, redelivered %v (want >= %d), archived %v, delivered %v, in flight acquired %v available %v",
			series(m, members), series(m, redelivered), max(held, 4), series(m, archived), series(m, delivered),
			series(m, inFlight, `state="acquired"`), series(m, inFlight, `state="available"`))
	})
	if got := startOffset(t, adm, group, topic); got != n {
		t.Errorf("start offset %d, want %d", got, n)
	}
}
