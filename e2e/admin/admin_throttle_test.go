package admin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
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

const (
	throttleRecord  = 64 << 10  // bytes per catch-up record
	throttleLimit   = 4_000_000 // bytes/s
	throttleBacklog = 40 << 20  // bytes the lagging follower misses
)

// logEndOn reads a hosted partition's log end offset from a broker's
// /metrics (ringlog_partition_log_end_offset).
func logEndOn(t *testing.T, b *harness.BrokerProc, topic string) float64 {
	t.Helper()
	v, _ := harness.SumSeries(harness.Scrape(t, b.Admin), "ringlog_partition_log_end_offset", `topic="`+topic+`"`)
	return v
}

// throttleTopic starts a 3-node cluster with an RF=3 topic of one
// partition and returns it, a client and admin client, the partition's
// leader and the follower to hold back: neither the leader nor the
// controller, since stopping either would move them and blur what is
// measured.
func throttleTopic(t *testing.T, topic string) (c *harness.Cluster, cl *kgo.Client, adm *kadm.Client, leader, lagger int32) {
	t.Helper()
	c = harness.StartReplCluster(t, 3, "--fsync", "never")
	cl = c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...))
	adm = kadm.NewClient(cl)
	md := harness.CreateRF3Topic(t, adm, topic, 1)
	leader = md.Topics[topic].Partitions[0].Leader
	ctrl := c.Controller(10 * time.Second)
	for id := int32(1); id <= 3; id++ {
		if id != leader && id != ctrl {
			lagger = id
		}
	}
	return c, cl, adm, leader, lagger
}

// throttleBacklog stops the lagger until it leaves the ISR and writes the
// backlog with acks=all through prod. It returns the log end offset
// after the backlog. While the lagger is stopped only the leader is asked
// anything (admin requests to a stopped broker would hang).
func writeBacklog(t *testing.T, c *harness.Cluster, prod *kgo.Client, topic string, leader, lagger int32) int64 {
	t.Helper()
	ctx := harness.Context(t, 60*time.Second)
	// Before the stop: the producer id and metadata come from any broker,
	// which might be the stopped one.
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatalf("first write: %v", err)
	}
	c.Node(lagger).Pause()
	paused := time.Now()
	// The next acks=all write waits until the leader drops the lagger
	// from the ISR (replica lag time).
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatalf("write after the stop: %v", err)
	}
	harness.Eventually(t, 30*time.Second, "the lagger out of the ISR", func() (bool, string) {
		v, _ := harness.SumSeries(harness.Scrape(t, c.Node(leader).Admin), "ringlog_partition_isr_size", `topic="`+topic+`"`)
		return v == 2, fmt.Sprint("ISR size ", v)
	})
	t.Logf("lagger out of the ISR %v after it stopped", time.Since(paused))
	// Incompressible records, so bytes on the wire are bytes in the log.
	val := make([]byte, throttleRecord)
	var last int64
	for sent := 0; sent < throttleBacklog; sent += 16 * throttleRecord {
		recs := make([]*kgo.Record, 16)
		for i := range recs {
			rand.Read(val)
			recs[i] = &kgo.Record{Topic: topic, Value: slices.Clone(val)}
		}
		res := prod.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("backlog: %v", err)
		}
		last = res[len(res)-1].Record.Offset
	}
	return last + 1
}

// ackLoad produces one small acks=all record every 20 ms until stop and
// returns the ack latencies and errors.
func ackLoad(t *testing.T, cl *kgo.Client, topic string, stop <-chan struct{}) func() ([]time.Duration, []error) {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("small")}).FirstErr()
			cancel()
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				lat = append(lat, time.Since(start))
			}
			mu.Unlock()
		}
	}()
	return func() ([]time.Duration, []error) {
		wg.Wait()
		return lat, errs
	}
}

// throttledCatchUp resumes the lagger and measures its catch-up over 4 s
// while a small acks=all load runs, and checks the rate is about
// throttleLimit and the acks were not held back (the in-sync follower is
// never throttled). It returns the lagger's log end offsets at the start
// and end of the measurement.
func throttledCatchUp(t *testing.T, c *harness.Cluster, prod *kgo.Client, topic string, lagger int32, end int64) (o0, o1 float64) {
	t.Helper()
	stop := make(chan struct{})
	acks := ackLoad(t, prod, topic, stop)
	c.Node(lagger).Resume()
	resumed := time.Now()
	start := logEndOn(t, c.Node(lagger), topic)
	harness.Eventually(t, 20*time.Second, "the lagger starts catching up", func() (bool, string) {
		o := logEndOn(t, c.Node(lagger), topic)
		return o > start, fmt.Sprint("log end ", o)
	})
	t.Logf("lagger fetching %v after resuming", time.Since(resumed))
	// Real time: past the first fetches (the bucket's saved-up second, the
	// lagger's metadata catching up), measure 4 s.
	time.Sleep(time.Second)
	t0, o0 := time.Now(), logEndOn(t, c.Node(lagger), topic)
	// The measured window: the 40 MiB backlog outlasts it at 4 MB/s, while
	// a follower the throttle let through would catch up within it.
	harness.Holds(t, 4*time.Second, "the lagger still behind during the measurement", func() (bool, string) {
		o := logEndOn(t, c.Node(lagger), topic)
		return o < float64(end), fmt.Sprintf("offset %v of %d", o, end)
	})
	t1, o1 := time.Now(), logEndOn(t, c.Node(lagger), topic)
	close(stop)
	lat, errs := acks()
	rate := (o1 - o0) * throttleRecord / t1.Sub(t0).Seconds()
	t.Logf("throttled catch-up: %.2f MB/s (limit %.2f); offsets %0.f -> %0.f of %d; acks=all p50 %v p99 %v max %v over %d writes",
		rate/1e6, throttleLimit/1e6, o0, o1, end, harness.Percentile(lat, 0.5), harness.Percentile(lat, 0.99), slices.Max(lat), len(lat))
	if o1 >= float64(end) {
		t.Fatalf("the lagger caught up within the measurement: offset %v of %d", o1, end)
	}
	if rate < 0.5*throttleLimit || rate > 1.5*throttleLimit {
		t.Fatalf("catch-up at %.2f MB/s under a %.2f MB/s throttle", rate/1e6, throttleLimit/1e6)
	}
	// One write per 20 ms for about 5 s, each waiting for the last: a
	// throttled in-sync follower holds acks for hundreds of ms, so fewer
	// get through and the p99 climbs (measured: 59 writes, p99 1.05 s;
	// unthrottled about 250, p99 under 60 ms).
	if len(errs) > 0 || len(lat) < 150 {
		t.Fatalf("acks=all during the catch-up: %d acked, errors %v", len(lat), errs)
	}
	if p99 := harness.Percentile(lat, 0.99); p99 > 500*time.Millisecond {
		t.Fatalf("acks=all held back during the throttled catch-up: p99 %v", p99)
	}
	return o0, o1
}

// waitThrottleRate polls b's /metrics until side's throttle rate gauge
// shows want (0: unlimited).
func waitThrottleRate(t *testing.T, b *harness.BrokerProc, side string, want float64) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, side+" rate applied", func() (bool, string) {
		v, _ := harness.SumSeries(harness.Scrape(t, b.Admin), "ringlog_replication_throttle_rate_bytes", `side="`+side+`"`)
		return v == want, fmt.Sprint("rate gauge ", v)
	})
}

func TestAdminReplicationThrottle(t *testing.T) {
	harness.Processes(t) // SIGSTOP
	const topic = "thr"
	c, cl, adm, leader, lagger := throttleTopic(t, topic)
	ctx := harness.Context(t, 120*time.Second)
	began := time.Now()
	other := 6 - leader - lagger

	// Validation with Kafka's codes.
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"negative rate", harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("leader.replication.throttled.rate", "-1")}))},
		{"bad replica list", harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("leader.replication.throttled.replicas", "0:x")}, topic))},
		{"star in a list", harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("follower.replication.throttled.replicas", "*,0:1")}, topic))},
	} {
		if !errors.Is(tc.err, kerr.InvalidConfig) {
			t.Fatalf("%s: %v, want INVALID_CONFIG", tc.what, tc.err)
		}
	}

	// Throttle the partition's followers on its leader at 4 MB/s (the
	// list names the leader, as Kafka's reassignment tool writes it). Set
	// while every replica is in the ISR, it throttles nothing until one
	// falls out.
	if err := harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("leader.replication.throttled.replicas", fmt.Sprintf("0:%d", leader))}, topic)); err != nil {
		t.Fatalf("throttled replicas: %v", err)
	}
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("leader.replication.throttled.rate", fmt.Sprint(throttleLimit))}, leader)); err != nil {
		t.Fatalf("throttled rate: %v", err)
	}
	broker := kmsg.ConfigResourceTypeBroker
	waitConfigEverywhere(t, cl, []int32{leader}, broker, fmt.Sprint(leader), "leader.replication.throttled.rate", fmt.Sprint(throttleLimit), kmsg.ConfigSourceDynamicBrokerConfig)
	if d := describeOn(t, cl, other, broker, fmt.Sprint(other))["leader.replication.throttled.rate"]; d.value != "9223372036854775807" || d.source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("broker %d leader.replication.throttled.rate %+v, want Kafka's default", other, d)
	}
	waitThrottleRate(t, c.Node(leader), "leader", throttleLimit)

	t.Logf("configs set after %v", time.Since(began))
	// The lagger misses 40 MB.
	prod := c.Node(leader).Client(t, kgo.SeedBrokers(c.Addrs(lagger)...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	end := writeBacklog(t, c, prod, topic, leader, lagger)
	t.Logf("leader %d, lagger %d stopped; backlog written up to offset %d (%v)", leader, lagger, end, time.Since(began))

	o0, o1 := throttledCatchUp(t, c, prod, topic, lagger, end)
	m := harness.Scrape(t, c.Node(leader).Admin)
	if b, _ := harness.SumSeries(m, "ringlog_replication_throttled_bytes_total", `side="leader"`); b < (o1-o0)*throttleRecord*0.9 {
		t.Fatalf("leader throttled bytes %v, the lagger got %v meanwhile", b, (o1-o0)*throttleRecord)
	}
	if f, _ := harness.SumSeries(m, "ringlog_replication_throttled_fetches_total", `side="leader"`); f == 0 {
		t.Fatal("no fetch was throttled")
	}

	// Remove the rate: the rest comes at once and the lagger rejoins.
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{deleteCfg("leader.replication.throttled.rate")}, leader)); err != nil {
		t.Fatal(err)
	}
	t2, o2 := time.Now(), logEndOn(t, c.Node(lagger), topic)
	harness.Eventually(t, 10*time.Second, "the lagger at the log end", func() (bool, string) {
		o := logEndOn(t, c.Node(lagger), topic)
		return o >= float64(end), fmt.Sprint("log end ", o)
	})
	took := time.Since(t2)
	fast := (float64(end) - o2) * throttleRecord / took.Seconds()
	t.Logf("unthrottled: %.0f records in %v = %.1f MB/s", float64(end)-o2, took, fast/1e6)
	if fast < 2*throttleLimit {
		t.Fatalf("without the throttle the rest came at %.2f MB/s, not faster than twice the limit", fast/1e6)
	}
	waitThrottleRate(t, c.Node(leader), "leader", 0)
	harness.WaitMetadata(t, adm, 30*time.Second, "the lagger back in the ISR", harness.FullISR(topic, 1))
	t.Logf("lagger back in the ISR %v after the rate was removed; test body %v", time.Since(t2), time.Since(began))
}

// TestAdminReplicationThrottleFollower: the same catch-up held to
// follower.replication.throttled.rate on the lagger itself, whose fetcher
// leaves the throttled partition out of its fetches meanwhile.
func TestAdminReplicationThrottleFollower(t *testing.T) {
	harness.Processes(t) // SIGSTOP
	const topic = "thrf"
	c, cl, adm, leader, lagger := throttleTopic(t, topic)
	ctx := harness.Context(t, 120*time.Second)
	// Every replica listed, the in-sync follower too: it must not be
	// throttled (nor leave the ISR), or acks=all would wait on it.
	if err := harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("follower.replication.throttled.replicas", "*")}, topic)); err != nil {
		t.Fatalf("throttled replicas: %v", err)
	}
	// The cluster-wide default: every broker's follower side.
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("follower.replication.throttled.rate", fmt.Sprint(throttleLimit))})); err != nil {
		t.Fatalf("throttled rate: %v", err)
	}
	broker := kmsg.ConfigResourceTypeBroker
	waitConfigEverywhere(t, cl, []int32{lagger}, broker, fmt.Sprint(lagger), "follower.replication.throttled.rate", fmt.Sprint(throttleLimit), kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	waitThrottleRate(t, c.Node(lagger), "follower", throttleLimit)
	prod := c.Node(leader).Client(t, kgo.SeedBrokers(c.Addrs(lagger)...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	end := writeBacklog(t, c, prod, topic, leader, lagger)
	shrinks, _ := harness.SumSeries(harness.Scrape(t, c.Node(leader).Admin), "ringlog_isr_shrinks_total")
	o0, o1 := throttledCatchUp(t, c, prod, topic, lagger, end)
	if after, _ := harness.SumSeries(harness.Scrape(t, c.Node(leader).Admin), "ringlog_isr_shrinks_total"); after != shrinks {
		t.Fatalf("the ISR shrank during the throttled catch-up (%v -> %v shrinks): an in-sync follower was held back", shrinks, after)
	}
	m := harness.Scrape(t, c.Node(lagger).Admin)
	if b, _ := harness.SumSeries(m, "ringlog_replication_throttled_bytes_total", `side="follower"`); b < (o1-o0)*throttleRecord*0.9 {
		t.Fatalf("follower throttled bytes %v, it got %v meanwhile", b, (o1-o0)*throttleRecord)
	}
	if f, _ := harness.SumSeries(m, "ringlog_replication_throttled_fetches_total", `side="follower"`); f == 0 {
		t.Fatal("no fetch was throttled")
	}
	if b, _ := harness.SumSeries(harness.Scrape(t, c.Node(leader).Admin), "ringlog_replication_throttled_bytes_total", `side="leader"`); b != 0 {
		t.Fatalf("leader side counted %v throttled bytes with no leader rate set", b)
	}
	// Removing the list frees the lagger at once.
	if err := harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{deleteCfg("follower.replication.throttled.replicas")}, topic)); err != nil {
		t.Fatal(err)
	}
	harness.WaitMetadata(t, adm, 30*time.Second, "the lagger back in the ISR", harness.FullISR(topic, 1))
}

// confluentThrottleScript sets the throttle configs with confluent-kafka's
// AdminClient.alter_configs (AlterConfigs) on a topic and a broker and
// prints what describe_configs reports: "<value> <source>" per config.
const confluentThrottleScript = `
import sys
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
addr, topic, broker = sys.argv[1], sys.argv[2], sys.argv[3]
a = AdminClient({"bootstrap.servers": addr})
rs = [ConfigResource("topic", topic, set_config={"leader.replication.throttled.replicas": "0:1, 1:2"}),
      ConfigResource("broker", broker, set_config={"follower.replication.throttled.rate": "1000000"})]
for res, f in a.alter_configs(rs, request_timeout=15).items():
    f.result()
for res, key in ((ConfigResource("topic", topic), "leader.replication.throttled.replicas"),
                 (ConfigResource("broker", broker), "follower.replication.throttled.rate"),
                 (ConfigResource("broker", broker), "leader.replication.throttled.rate")):
    for _, f in a.describe_configs([res], request_timeout=15).items():
        e = f.result()[key]
        print(e.value, ConfigSource(e.source).name)
`

func TestAdminReplicationThrottleConfluent(t *testing.T) {
	t.Parallel()
	harness.NeedConfluentKafka(t)
	b := harness.StartBroker(t, t.TempDir(), "--fsync", "never")
	adm := kadm.NewClient(b.Client(t))
	harness.CreateTopic(t, adm, "pythr", 2, 1)
	bm, err := adm.BrokerMetadata(harness.Context(t, 10*time.Second))
	if err != nil || len(bm.Brokers) != 1 {
		t.Fatalf("broker metadata: %v %+v", err, bm)
	}
	out := harness.RunCmd(t, "", 60*time.Second, "/usr/bin/python3", "-c", confluentThrottleScript, b.Addr, "pythr", fmt.Sprint(bm.Brokers[0].NodeID))
	want := "0:1,1:2 DYNAMIC_TOPIC_CONFIG\n1000000 DYNAMIC_BROKER_CONFIG\n9223372036854775807 DEFAULT_CONFIG"
	if got := strings.TrimSpace(out); got != want {
		t.Fatalf("python describe after alter:\n%s\nwant\n%s", got, want)
	}
}
