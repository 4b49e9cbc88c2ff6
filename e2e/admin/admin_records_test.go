package admin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// produceDR writes n records of about 200 bytes to topic/0 with acks=all,
// in batches of 50 (so several segments at a small segment.bytes).
func produceDR(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx := harness.Context(t, 30*time.Second)
	for i := from; i < from+n; i += 50 {
		var recs []*kgo.Record
		for j := i; j < min(i+50, from+n); j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("%06d-%s", j, strings.Repeat("x", 190)))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// logStartOn reads a broker's ringlog_partition_log_start_offset for
// topic/0 (-1 when it does not host it).
func logStartOn(t *testing.T, b *harness.BrokerProc, topic string) float64 {
	t.Helper()
	v, ok := harness.Scrape(t, b.Admin)[fmt.Sprintf(`ringlog_partition_log_start_offset{partition="0",topic="%s"}`, topic)]
	if !ok {
		return -1
	}
	return v
}

// firstOffset consumes topic/0 from at with franz-go's default reset
// policy (earliest) and returns the first offset it gets.
func firstOffset(t *testing.T, c *harness.Cluster, topic string, at kgo.Offset) int64 {
	t.Helper()
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: at}}))
	ctx := harness.Context(t, 15*time.Second)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: nothing within 15s: %v", topic, fs.Errors())
		}
		var first int64 = -1
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first = r.Offset
			}
		})
		if first >= 0 {
			return first
		}
	}
}

func TestAdminDeleteRecords(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9, SIGSTOP
	c := harness.StartCluster(t, 3)
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	seg := "8192"
	harness.CreateTopicWith(t, adm, "dr", 1, 3, map[string]*string{"segment.bytes": &seg})
	const n, cut = 2000, 1234
	produceDR(t, cl, "dr", 0, n)

	// Beyond the high watermark: OFFSET_OUT_OF_RANGE, nothing moves.
	ctx := harness.Context(t, 30*time.Second)
	res, err := adm.DeleteRecords(ctx, kadm.Offsets{"dr": {0: {At: n + 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords above HW: %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	// Partitions that do not exist, asked of a broker directly (kadm
	// refuses to route them itself).
	dreq := kmsg.NewPtrDeleteRecordsRequest()
	dreq.TimeoutMillis = 5000
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"dr", 7}, {"nosuch", 0}} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = tp.p, 1
		rt.Partitions = append(rt.Partitions, rp)
		dreq.Topics = append(dreq.Topics, rt)
	}
	dkr, err := cl.Broker(int(leaderOf(t, adm, "dr"))).Request(ctx, dreq)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range dkr.(*kmsg.DeleteRecordsResponse).Topics {
		if p := rt.Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.LowWatermark != -1 {
			t.Fatalf("DeleteRecords %s-%d: error %d low watermark %d, want UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, p.Partition, p.ErrorCode, p.LowWatermark)
		}
	}

	start := time.Now()
	res, err = adm.DeleteRecords(ctx, kadm.Offsets{"dr": {0: {At: cut}}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := res.Lookup("dr", 0)
	if r.Err != nil || r.LowWatermark != cut {
		t.Fatalf("DeleteRecords to %d: %+v", cut, r)
	}
	took := time.Since(start)
	t.Logf("DeleteRecords answered in %v (waits for the ISR's log starts)", took.Round(time.Millisecond))
	// Woken, not polled: the move wakes the followers' parked fetches,
	// their next fetches report the start, and that wakes the wait. A
	// follower learning it only when its long poll (500 ms) ran out
	// would take longer than this.
	if took > 450*time.Millisecond {
		t.Fatalf("DeleteRecords took %v: the followers' long polls were not woken", took)
	}
	// The answer waited for the low watermark: every replica already has
	// the new start.
	for i, b := range c.Nodes {
		if got := logStartOn(t, b, "dr"); got != cut {
			t.Fatalf("node %d log start %v right after DeleteRecords, want %d", i+1, got, cut)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Err != nil || o.Offset != cut {
		t.Fatalf("ListOffsets earliest %+v, want %d", o, cut)
	}
	// Segments wholly below the start are gone on every replica.
	for i, b := range c.Nodes {
		segs, _ := filepath.Glob(filepath.Join(b.DataDir, "dr-0", "*.log"))
		if len(segs) == 0 || len(segs) > (n-cut)*260/8192+2 {
			t.Fatalf("node %d holds %d segments after the cut", i+1, len(segs))
		}
	}
	// A consumer from earliest starts at the cut; one below it is reset
	// (franz-go's default policy: earliest) instead of reading deleted data.
	if got := firstOffset(t, c, "dr", kgo.NewOffset().AtStart()); got != cut {
		t.Fatalf("consumer from earliest starts at %d, want %d", got, cut)
	}
	if got := firstOffset(t, c, "dr", kgo.NewOffset().At(100)); got != cut {
		t.Fatalf("consumer from 100 starts at %d after reset, want %d", got, cut)
	}
	leader := leaderOf(t, adm, "dr")
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes, fetch.SessionEpoch = 11, -1, 100, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "dr"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 100, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	kr, err := cl.Broker(int(leader)).Request(ctx, fetch)
	if err != nil {
		t.Fatal(err)
	}
	if p := kr.(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != cut {
		t.Fatalf("fetch below the start: error %d log start %d, want OFFSET_OUT_OF_RANGE and %d", p.ErrorCode, p.LogStartOffset, cut)
	}

	// kill -9 every node: the start inside a segment survives (only the
	// log-start checkpoint records it), on whichever node leads next.
	for _, b := range c.Nodes {
		b.Kill9()
	}
	for _, b := range c.Nodes {
		b.Launch()
	}
	for _, b := range c.Nodes {
		b.WaitReady(60 * time.Second)
	}
	for i, b := range c.Nodes {
		if got := logStartOn(t, b, "dr"); got != cut {
			t.Fatalf("node %d log start %v after kill -9 and restart, want %d", i+1, got, cut)
		}
	}
	harness.Eventually(t, 20*time.Second, "ListOffsets earliest after restart", func() (bool, string) {
		starts, err := adm.ListStartOffsets(harness.Context(t, 5*time.Second), "dr")
		if err != nil {
			return false, err.Error()
		}
		o, _ := starts.Lookup("dr", 0)
		return o.Err == nil && o.Offset == cut, fmt.Sprintf("%+v", o)
	})
	// Produce and delete again (-1: up to the high watermark).
	produceDR(t, cl, "dr", n, 100)
	res, err = adm.DeleteRecords(harness.Context(t, 30*time.Second), kadm.Offsets{"dr": {0: {At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); r.Err != nil || r.LowWatermark != n+100 {
		t.Fatalf("DeleteRecords to the HW: %+v, want low watermark %d", r, n+100)
	}

	// A follower that cannot fetch holds the low watermark back: the
	// answer comes at timeout_ms with REQUEST_TIMED_OUT. The pause stays
	// well under the 3 s session timeout, so the follower stays in the ISR.
	produceDR(t, cl, "dr", n+100, 100)
	leader = leaderOf(t, adm, "dr")
	follower := c.Node(leader%3 + 1)
	follower.Pause()
	short := kadm.NewClient(cl)
	short.SetTimeoutMillis(800)
	start = time.Now()
	type drResult struct {
		res kadm.DeleteRecordsResponses
		err error
	}
	answered := make(chan drResult, 1)
	go func() {
		res, err := short.DeleteRecords(harness.Context(t, 10*time.Second), kadm.Offsets{"dr": {0: {At: n + 150}}})
		answered <- drResult{res, err}
	}()
	// The wait is parked in the purgatory (not a polling loop) until the
	// timeout answers it, and gone once answered.
	purgSize := `ringlog_purgatory_size{purgatory="delete_records"}`
	harness.Eventually(t, 700*time.Millisecond, "DeleteRecords parked in the purgatory", func() (bool, string) {
		v := harness.Scrape(t, c.Node(leader).Admin)[purgSize]
		return v == 1, fmt.Sprint(v)
	})
	dr := <-answered
	took = time.Since(start)
	res, err = dr.res, dr.err
	follower.Resume()
	if got := harness.Scrape(t, c.Node(leader).Admin)[purgSize]; got != 0 {
		t.Fatalf("delete_records purgatory size %v after the answer, want 0", got)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); !errors.Is(r.Err, kerr.RequestTimedOut) || took < 700*time.Millisecond || took > 2*time.Second {
		t.Fatalf("DeleteRecords with a paused follower: %+v after %v, want REQUEST_TIMED_OUT after ~800ms", r, took)
	}
	// The leader moved its start anyway; once the follower fetches again
	// the low watermark catches up.
	harness.Eventually(t, 10*time.Second, "low watermark after the follower resumed", func() (bool, string) {
		res, err := adm.DeleteRecords(harness.Context(t, 5*time.Second), kadm.Offsets{"dr": {0: {At: n + 150}}})
		if err != nil {
			return false, err.Error()
		}
		r, _ := res.Lookup("dr", 0)
		return r.Err == nil && r.LowWatermark == n+150, fmt.Sprintf("%+v", r)
	})
}

// leaderOf returns the leader of topic/0.
func leaderOf(t *testing.T, adm *kadm.Client, topic string) int32 {
	t.Helper()
	m, err := adm.Metadata(harness.Context(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	return m.Topics[topic].Partitions[0].Leader
}

// logSegmentBytes sums the .log files of dir as stat sees them.
func logSegmentBytes(t *testing.T, dir string) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	var n int64
	for _, s := range segs {
		st, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

func TestAdminDescribeLogDirs(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, 3)
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	seg := "16384"
	harness.CreateTopicWith(t, adm, "ld", 1, 3, map[string]*string{"segment.bytes": &seg})
	harness.CreateTopic(t, adm, "other", 2, 1)
	produceDR(t, cl, "ld", 0, 500)

	// check describes every broker's dir and compares ld-0's size with
	// the segment files on disk; it returns the sizes by node.
	check := func() map[int32]int64 {
		t.Helper()
		sizes := map[int32]int64{}
		harness.Eventually(t, 10*time.Second, "DescribeLogDirs sizes match the segment files", func() (bool, string) {
			all, err := adm.DescribeAllLogDirs(harness.Context(t, 10*time.Second), kadm.TopicsSet{"ld": {0: {}}})
			if err != nil {
				return false, err.Error()
			}
			if len(all) != 3 {
				return false, fmt.Sprintf("%d brokers answered", len(all))
			}
			for id, dirs := range all {
				b := c.Node(id)
				d, ok := dirs[b.DataDir]
				if !ok || d.Err != nil || len(dirs) != 1 {
					return false, fmt.Sprintf("node %d dirs %+v, want only %s", id, dirs, b.DataDir)
				}
				if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
					return false, fmt.Sprintf("node %d total %d usable %d", id, d.TotalBytes, d.UsableBytes)
				}
				if _, ok := d.Topics["other"]; ok {
					return false, fmt.Sprintf("node %d lists a topic not asked for", id)
				}
				p, ok := d.Topics.Lookup("ld", 0)
				if !ok || p.IsFuture || p.OffsetLag != 0 {
					return false, fmt.Sprintf("node %d ld-0 %+v", id, p)
				}
				if disk := logSegmentBytes(t, filepath.Join(b.DataDir, "ld-0")); p.Size != disk {
					return false, fmt.Sprintf("node %d ld-0 size %d, segment files %d", id, p.Size, disk)
				}
				sizes[id] = p.Size
			}
			return true, ""
		})
		return sizes
	}
	before := check()
	produceDR(t, cl, "ld", 500, 300)
	after := check()
	for id, n := range after {
		if n <= before[id] {
			t.Fatalf("node %d: size %d after producing, was %d", id, n, before[id])
		}
	}
	t.Logf("ld-0 sizes before %v after %v", before, after)

	// No filter: every hosted partition, "other" (RF=1) on one node each.
	all, err := adm.DescribeAllLogDirs(harness.Context(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for id, dirs := range all {
		d := dirs[c.Node(id).DataDir]
		if _, ok := d.Topics.Lookup("ld", 0); !ok {
			t.Fatalf("node %d: ld-0 missing without a filter: %+v", id, d.Topics)
		}
		for p := range d.Topics["other"] {
			others++
			if p < 0 || p > 1 {
				t.Fatalf("node %d lists other-%d", id, p)
			}
		}
	}
	if others != 2 {
		t.Fatalf("other's 2 partitions listed %d times over the brokers", others)
	}
	// Unknown topics and partitions are left out, as in Kafka.
	d, err := adm.DescribeBrokerLogDirs(harness.Context(t, 10*time.Second), 1, kadm.TopicsSet{"nosuch": {0: {}}, "ld": {9: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d[c.Node(1).DataDir].Topics); n != 0 {
		t.Fatalf("unknown partitions described: %+v", d)
	}
}

// TestAdminRecordsAuthorization: with the authorizer on, DeleteRecords
// needs DELETE on the topic and DescribeLogDirs DESCRIBE on the cluster.
// Also the single-broker (RF=1, not replicated) DeleteRecords path.
func TestAdminRecordsAuthorization(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // startAuthorizedBroker restarts the broker
	b, as := startAuthorizedBroker(t, []string{"orders"})
	admin, alice := kadm.NewClient(as("admin")), kadm.NewClient(as("alice"))
	produceDR(t, b.Client(t, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism())), "orders", 0, 100)
	ctx := harness.Context(t, 20*time.Second)
	del := func(cl *kadm.Client, at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		res, err := cl.DeleteRecords(ctx, kadm.Offsets{"orders": {0: {At: at}}})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := res.Lookup("orders", 0)
		return r
	}
	grant := func(op kadm.ACLOperation) {
		t.Helper()
		if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(op)); err != nil || res[0].Err != nil {
			t.Fatalf("grant %v: %v %+v", op, err, res)
		}
	}
	// DESCRIBE lets kadm route the request (metadata lists the topic);
	// DELETE is what the broker checks.
	grant(kadm.OpDescribe)
	if r := del(alice, 10); !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice DeleteRecords without DELETE: %+v", r)
	}
	if _, err := alice.DescribeBrokerLogDirs(ctx, 1, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice DescribeLogDirs without DESCRIBE on the cluster: %v", err)
	}
	grant(kadm.OpDelete)
	if r := del(alice, 40); r.Err != nil || r.LowWatermark != 40 {
		t.Fatalf("alice DeleteRecords with DELETE: %+v, want low watermark 40", r)
	}
	d, err := admin.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d[b.DataDir].Topics.Lookup("orders", 0); !ok || p.Size != logSegmentBytes(t, filepath.Join(b.DataDir, "orders-0")) {
		t.Fatalf("admin DescribeLogDirs: %+v", d)
	}
}
