// Package share runs franz-go's share consumer (KIP-932) against a
// ringlog broker: several consumers on one partition, acknowledgements of
// every kind, lock expiry and the delivery count limit.
package share

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMain(m *testing.M) { harness.Main(m) }

// setGroupConfigs sets share group configs (GROUP config resource).
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("set group configs %v: %v", kvs, err)
	}
}

// startOffset is the share-partition start offset of group on topic/0.
func startOffset(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	t.Helper()
	so, err := describeStartOffset(cl, group, topic)
	if err != nil {
		t.Fatalf("describe share offsets: %v", err)
	}
	return so
}

// describeStartOffset is startOffset's request, its error returned (a
// test waiting through a failover asks again).
func describeStartOffset(cl *kgo.Client, group, topic string) (int64, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return -1, err
	}
	p := g.Topics[0].Partitions[0]
	return p.StartOffset, kerr.ErrorForCode(p.ErrorCode)
}

func shareClient(t *testing.T, addr, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// deliveries records what the consumers saw, per key.
type deliveries struct {
	mu       sync.Mutex
	accepted map[int][]int32   // key -> delivery counts at which it was accepted
	seen     map[int][]int32   // key -> every delivery count it was seen with
	byMember map[string]int    // consumer -> records it accepted
	at       map[int]time.Time // key -> when it was accepted
}

func (d *deliveries) saw(member string, key int, dc int32, accepted bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen[key] = append(d.seen[key], dc)
	if accepted {
		d.accepted[key] = append(d.accepted[key], dc)
		d.byMember[member]++
		d.at[key] = time.Now()
	}
}

// TestShareGroupQueue: four share consumers on one partition of 3,000
// records. Every record is accepted exactly once; records released on
// their first delivery come back with delivery count 2; rejected ones
// never come back; the records a consumer acquired and then sat on (no
// poll, no ack) are redelivered with delivery count 2 once their lock
// (3 s here) expires; the share-partition start offset ends at the log
// end.
func TestShareGroupQueue(t *testing.T) {
	b := harness.StartBroker(t, filepath.Join(t.TempDir(), "data"))
	const (
		topic, group = "queue", "workers"
		n            = 3000
	)
	adm := harness.NewClient(t, []string{b.Addr})
	if _, err := kadm.NewClient(adm).CreateTopic(harness.Context(t, 10*time.Second), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setGroupConfigs(t, adm, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "3000")
	harness.ProduceN(t, adm, topic, n)

	released := func(k int) bool { return k%100 == 7 }
	rejected := func(k int) bool { return k%100 == 13 }
	d := &deliveries{accepted: map[int][]int32{}, seen: map[int][]int32{}, byMember: map[string]int{}, at: map[int]time.Time{}}

	// The staller acquires records and then neither polls nor acks: its
	// locks must expire and its records go to the others.
	staller := shareClient(t, b.Addr, group, topic, kgo.ShareMaxRecords(20))
	var stalled []int
	ctx := harness.Context(t, 20*time.Second)
	for len(stalled) == 0 && ctx.Err() == nil {
		for _, r := range staller.PollFetches(ctx).Records() {
			k, _ := strconv.Atoi(string(r.Key))
			stalled = append(stalled, k)
		}
	}
	if len(stalled) == 0 {
		t.Fatal("the staller got no records")
	}
	stalledAt := time.Now()
	defer staller.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 4 {
		member := fmt.Sprintf("c%d", i)
		cl := shareClient(t, b.Addr, group, topic, kgo.ShareMaxRecords(50))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				for _, r := range fs.Records() {
					k, _ := strconv.Atoi(string(r.Key))
					dc := r.DeliveryCount()
					switch {
					case rejected(k):
						r.Ack(kgo.AckReject)
						d.saw(member, k, dc, false)
					case released(k) && dc == 1:
						r.Ack(kgo.AckRelease)
						d.saw(member, k, dc, false)
					default:
						r.Ack(kgo.AckAccept)
						d.saw(member, k, dc, true)
					}
				}
				if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("%s: flush acks: %v", member, err)
				}
			}
		}()
	}
	want := 0
	for k := range n {
		if !rejected(k) {
			want++
		}
	}
	harness.Eventually(t, 50*time.Second, "every record accepted", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.accepted) == want, fmt.Sprintf("%d of %d keys accepted", len(d.accepted), want)
	})
	// A rejected or accepted record delivered again would show within a
	// second: the consumers poll continuously and nothing is left to hand
	// out, so a wrong redelivery is the next fetch's.
	harness.Holds(t, time.Second, "no accepted or rejected record delivered again", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for k := range n {
			if len(d.accepted[k]) > 1 || (rejected(k) && len(d.seen[k]) > 1) {
				return false, fmt.Sprintf("key %d seen %v, accepted %v", k, d.seen[k], d.accepted[k])
			}
		}
		return true, ""
	})
	cancel()
	wg.Wait()

	d.mu.Lock()
	defer d.mu.Unlock()
	isStalled := map[int]bool{}
	for _, k := range stalled {
		isStalled[k] = true
	}
	for k := range n {
		acc, seen := d.accepted[k], d.seen[k]
		switch {
		case rejected(k):
			if len(acc) != 0 || len(seen) != 1 {
				t.Errorf("rejected key %d: seen %v, accepted %v (want seen once, never accepted)", k, seen, acc)
			}
		case len(acc) != 1:
			t.Errorf("key %d accepted %d times (delivery counts %v)", k, len(acc), acc)
		case isStalled[k] && (acc[0] < 2 || d.at[k].Sub(stalledAt) < 2900*time.Millisecond):
			t.Errorf("stalled key %d accepted at delivery %d %v after it was acquired, want >= 2 after the 3 s lock", k, acc[0], d.at[k].Sub(stalledAt))
		case released(k) && !isStalled[k] && acc[0] != 2:
			t.Errorf("released key %d accepted at delivery %d, want 2 (seen %v)", k, acc[0], seen)
		}
	}
	busy := 0
	for m, c := range d.byMember {
		t.Logf("%s accepted %d records", m, c)
		if c > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("only %d consumers got records from the one partition: %v", busy, d.byMember)
	}
	t.Logf("staller held %d records; all redelivered after the lock expired", len(stalled))
	if got := startOffset(t, adm, group, topic); got != n {
		t.Errorf("share-partition start offset %d, want %d (every record finished)", got, n)
	}
}

// TestShareGroupDeliveryLimit: a record released on every delivery is
// delivered share.delivery.count.limit times (5 by default), then
// archived: never delivered again, and the start offset moves past it.
func TestShareGroupDeliveryLimit(t *testing.T) {
	b := harness.StartBroker(t, filepath.Join(t.TempDir(), "data"))
	const topic, group = "poison", "g"
	adm := harness.NewClient(t, []string{b.Addr})
	if _, err := kadm.NewClient(adm).CreateTopic(harness.Context(t, 10*time.Second), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	setGroupConfigs(t, adm, group, "share.auto.offset.reset", "earliest")
	harness.ProduceN(t, adm, topic, 2) // key 0 is the poison, key 1 fine

	cl := shareClient(t, b.Addr, group, topic)
	defer cl.Close()
	var counts []int32
	accepted := false
	ctx := harness.Context(t, 30*time.Second)
	for ctx.Err() == nil && (!accepted || len(counts) < 5) {
		for _, r := range cl.PollFetches(ctx).Records() {
			if string(r.Key) == "0" {
				counts = append(counts, r.DeliveryCount())
				r.Ack(kgo.AckRelease)
			} else {
				accepted = true
				r.Ack(kgo.AckAccept)
			}
		}
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// No sixth delivery.
	pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	for pctx.Err() == nil {
		for _, r := range cl.PollFetches(pctx).Records() {
			t.Errorf("delivered again: key %s delivery %d", r.Key, r.DeliveryCount())
		}
	}
	cancel()
	if fmt.Sprint(counts) != "[1 2 3 4 5]" {
		t.Errorf("poison record delivery counts %v, want [1 2 3 4 5]", counts)
	}
	if got := startOffset(t, adm, group, topic); got != 2 {
		t.Errorf("start offset %d, want 2 (poison archived, the other accepted)", got)
	}
}
