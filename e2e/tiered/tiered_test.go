package tiered

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startTieredCluster starts three nodes pointed at s3, each with a cache
// directory of its own, retention every second and uploads every second.
func startTieredCluster(t *testing.T, s3 *s3Proc, extra ...string) *harness.Cluster {
	t.Helper()
	flags := append([]string{
		"--replica-lag-time-max", harness.ReplicaLag.String(),
		"--retention-check-interval", "1s",
		"--remote-upload-interval", "1s",
	}, s3.brokerFlags()...)
	flags = append(flags, extra...)
	return harness.StartClusterAt(t, harness.FreshNodeSpecs(t, 3), 3, func(int) []string {
		return append(slices.Clone(flags), "--remote-cache-dir", filepath.Join(t.TempDir(), "cache"))
	})
}

// remoteStateAny asks the running nodes in turn.
func remoteStateAny(c *harness.Cluster, topic string) (remoteTopicJSON, error) {
	var err error
	for _, b := range c.Nodes {
		if !b.Running() {
			continue
		}
		var r remoteTopicJSON
		if r, err = remoteState(b.Admin, topic); err == nil {
			return r, nil
		}
	}
	return remoteTopicJSON{}, err
}

func (l *tieredLoad) ackSnapshot() map[int32][]ackRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32][]ackRec{}
	for p, as := range l.acks {
		out[p] = slices.Clone(as)
	}
	return out
}

func mergeAcks(ls ...*tieredLoad) map[int32][]ackRec {
	out := map[int32][]ackRec{}
	for _, l := range ls {
		for p, as := range l.ackSnapshot() {
			out[p] = append(out[p], as...)
		}
	}
	return out
}

// tieredSetup starts the S3 server and three brokers on it, and a client
// of the cluster.
func tieredSetup(t *testing.T) (*s3Proc, *harness.Cluster, *kgo.Client, *kadm.Client) {
	t.Helper()
	s3 := startS3(t)
	c := startTieredCluster(t, s3)
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...))
	return s3, c, cl, kadm.NewClient(cl)
}

func TestTieredIntegration(t *testing.T) {
	harness.NeedTool(t, "/usr/bin/kcat")
	testStart := time.Now()
	total := envBytes(t, "RINGLOG_TIERED_BYTES", 2<<30)
	segBytes := envBytes(t, "RINGLOG_TIERED_SEGMENT_BYTES", 8<<20)
	produceFor := envDuration(t, "RINGLOG_TIERED_PRODUCE_TIME", 150*time.Second)
	outage := envDuration(t, "RINGLOG_TIERED_OUTAGE", 60*time.Second)
	const (
		partitions = 6
		valueSize  = 1024
		window     = 30 * time.Second
		topic      = "tiered"
	)
	at := func() string { return time.Since(testStart).Truncate(100 * time.Millisecond).String() }

	s3, c, cl, adm := tieredSetup(t)
	harness.CreateTopicWith(t, adm, topic, partitions, 3, map[string]*string{
		"min.insync.replicas":   kadm.StringPtr("2"),
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.ms":    kadm.StringPtr(fmt.Sprint(window.Milliseconds())),
		"segment.bytes":         kadm.StringPtr(fmt.Sprint(segBytes)),
	})
	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs", harness.FullISR(topic, partitions))

	rate := float64(total) / produceFor.Seconds()
	t.Logf("%s: producing %s keyed (%d B values) at %.1f MB/s over %d partitions, segment.bytes %s, local window %v",
		at(), mib(total), valueSize, rate/1e6, partitions, mib(segBytes), window)
	ctx := harness.Context(t, 20*time.Minute)
	load := runTieredLoad(t, ctx, c.Addrs(), topic, 0, total, valueSize, rate)

	// Disk use of each broker's topic directories, every 2 s.
	type diskSample struct {
		at    time.Time
		bytes [3]int64
	}
	var (
		diskMu  sync.Mutex
		samples []diskSample
	)
	sampleStop := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-sampleStop:
				return
			case now := <-tk.C:
				var s diskSample
				s.at = now
				for i, b := range c.Nodes {
					s.bytes[i] = topicDiskBytes(b.DataDir, topic)
				}
				diskMu.Lock()
				samples = append(samples, s)
				diskMu.Unlock()
			}
		}
	}()
	stopSampling := sync.OnceFunc(func() { close(sampleStop); <-sampleDone })
	t.Cleanup(stopSampling)

	// (a) kill -9 the leader of partition 0 once it has uploaded, while
	// its uploads run; the next leader must resume from the metadata.
	leader := harness.PartitionLeader(t, adm, topic, partitions, 0)
	if ok, msg := poll(120*time.Second, 500*time.Millisecond, func() (bool, string) {
		v := metricSum(c.Node(leader), "ringlog_remote_bytes_uploaded_total")
		return v > 0, fmt.Sprintf("ringlog_remote_bytes_uploaded_total %v on node %d", v, leader)
	}); !ok {
		t.Fatalf("%s: no upload progress: %s", at(), msg)
	}
	// Then the kill lands mid-upload for sure: the store is frozen for a
	// moment, the leader's next upload hangs on it (lag_segments > 0 for
	// a second and more: the attempt starts within the 1 s interval), and
	// the leader dies with the request in flight.
	s3.pause()
	harness.Eventually(t, 30*time.Second, "a sealed segment waits for upload on the frozen store", func() (bool, string) {
		v := metricSum(c.Node(leader), "ringlog_remote_upload_lag_segments")
		return v > 0, fmt.Sprintf("ringlog_remote_upload_lag_segments %v on node %d", v, leader)
	})
	// Real time: nothing shows an upload in flight; within 1.5 s the
	// uploader's 1 s interval has started one, and it hangs.
	time.Sleep(1500 * time.Millisecond)
	var endAtKill int64 = -1
	if rs, err := remoteState(c.Node(leader).Admin, topic); err == nil {
		if rp, ok := rs.part(0); ok {
			endAtKill = rp.RemoteEnd
		}
	}
	lag := metricSum(c.Node(leader), "ringlog_remote_upload_lag_segments")
	t.Logf("%s: kill -9 node %d (leader of p0, p0 remote_end %d, %v sealed segments not uploaded, an upload in flight on the frozen store; %d records acked)",
		at(), leader, endAtKill, lag, load.acked.Load())
	c.Node(leader).Kill9()
	s3.resume()
	if lines := harness.GrepLines(c.Node(leader).Out.String(), "upload", 3); lines != "" {
		t.Logf("node %d's last upload log lines before the kill:\n%s", leader, lines)
	}
	// Real time: the killed leader stays down for 3 s before it restarts.
	time.Sleep(3 * time.Second)
	c.Node(leader).Restart()
	t.Logf("%s: node %d restarted", at(), leader)
	if ok, msg := poll(120*time.Second, time.Second, func() (bool, string) {
		rs, err := remoteStateAny(c, topic)
		if err != nil {
			return false, err.Error()
		}
		rp, _ := rs.part(0)
		return rp.RemoteEnd > endAtKill, fmt.Sprintf("p0 remote_end %d", rp.RemoteEnd)
	}); !ok {
		t.Fatalf("%s: p0 uploads did not resume after the leader's kill: %s", at(), msg)
	}
	resumed := time.Now()
	t.Logf("%s: p0 uploads resumed", at())

	// (b) the object store goes away for `outage` under load: first
	// frozen (requests hang), then killed (connections refused), then
	// started again on the same address and directory. 15 s first give
	// the latency before it a window clear of the kill's recovery (real
	// time: a measurement window).
	time.Sleep(15 * time.Second)
	sumAll := func(name string) (sum, maxv float64) {
		for _, b := range c.Nodes {
			v := metricSum(b, name)
			sum += v
			maxv = max(maxv, v)
		}
		return
	}
	errs0, _ := sumAll("ringlog_remote_upload_errors_total")
	outageStart := time.Now()
	t.Logf("%s: object store frozen (SIGSTOP), upload errors so far %v", at(), errs0)
	s3.pause()
	var heldMax, stalledMax, errsMax float64
	// sampleOutage samples the metrics every 2 s until the outage phase ends.
	sampleOutage := func(until time.Time) {
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for time.Now().Before(until) {
			_, h := sumAll("ringlog_remote_local_deletion_held_back_bytes")
			st, _ := sumAll("ringlog_remote_upload_stalled_partitions")
			e, _ := sumAll("ringlog_remote_upload_errors_total")
			heldMax, stalledMax, errsMax = max(heldMax, h), max(stalledMax, st), max(errsMax, e)
			<-tk.C
		}
	}
	sampleOutage(outageStart.Add(outage / 2))
	t.Logf("%s: object store killed (connections refused); upload errors while frozen %v -> %v, held-back bytes max %s", at(), errs0, errsMax, mib(int64(heldMax)))
	s3.kill()
	sampleOutage(outageStart.Add(outage))
	s3.restart()
	outageEnd := time.Now()
	t.Logf("%s: object store back on %s; during the outage: upload errors %v -> %v, held-back bytes max %s, stalled partitions max %v",
		at(), s3.addr, errs0, errsMax, mib(int64(heldMax)), stalledMax)
	select {
	case <-load.done:
		t.Fatalf("the load ended before the outage did (%v): produce faster than RINGLOG_TIERED_PRODUCE_TIME allows?", load.end.Sub(outageStart))
	default:
	}
	// Produce must not notice: acknowledgements every 5 s of the outage.
	for w := outageStart; w.Before(outageEnd.Add(-time.Second)); w = w.Add(5 * time.Second) {
		if n := load.acksIn(w, w.Add(5*time.Second)); n == 0 {
			t.Errorf("no acknowledgement in [%v, %v) of the outage", w.Sub(outageStart), w.Sub(outageStart)+5*time.Second)
		}
	}
	// Latency before: from the kill's recovery to the outage.
	beforeFrom := outageStart.Add(-20 * time.Second)
	if r := resumed.Add(3 * time.Second); r.After(beforeFrom) {
		beforeFrom = r
	}
	before := load.latencies(beforeFrom, outageStart)
	during := load.latencies(outageStart, outageEnd)
	t.Logf("produce ack latency: %v before the outage p50 %v p99 %v (%d acks); during p50 %v p99 %v (%d acks)",
		outageStart.Sub(beforeFrom).Truncate(time.Second), harness.Quantile(before, 0.5), harness.Quantile(before, 0.99), len(before), harness.Quantile(during, 0.5), harness.Quantile(during, 0.99), len(during))
	if errsMax <= errs0 {
		t.Errorf("ringlog_remote_upload_errors_total did not rise during the outage (%v -> %v)", errs0, errsMax)
	}
	if heldMax <= 0 {
		t.Errorf("ringlog_remote_local_deletion_held_back_bytes stayed 0 during a %v outage with a %v local window", outage, window)
	}
	// Uploads catch up: nothing held back any more.
	if ok, msg := poll(3*time.Minute, time.Second, func() (bool, string) {
		_, h := sumAll("ringlog_remote_local_deletion_held_back_bytes")
		return h == 0, fmt.Sprintf("held back %s", mib(int64(h)))
	}); !ok {
		t.Errorf("%s: uploads did not catch up after the outage: %s", at(), msg)
	}
	caughtUp := time.Now()
	t.Logf("%s: caught up after the outage (%v)", at(), caughtUp.Sub(outageEnd).Truncate(time.Second))

	load.wait(t, 10*time.Minute)
	t.Logf("%s: load done in %v: %d records acked (%s), %d produce errors (last %v)",
		at(), load.end.Sub(load.start).Truncate(time.Second), load.acked.Load(), mib(load.ackedB.Load()), load.errs, load.lastErr)
	if load.errs > 0 {
		t.Errorf("%d records were not acknowledged (last error %v)", load.errs, load.lastErr)
	}
	ends := harness.EndOffsets(t, adm, topic)

	// Every sealed segment gets uploaded: remote_end reaches the leader's
	// active segment.
	md := harness.WaitMetadata(t, adm, 30*time.Second, "leaders", func(m kadm.Metadata) bool {
		for _, p := range m.Topics[topic].Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return len(m.Topics[topic].Partitions) == partitions
	})
	if ok, msg := poll(3*time.Minute, time.Second, func() (bool, string) {
		rs, err := remoteStateAny(c, topic)
		if err != nil {
			return false, err.Error()
		}
		var behind []string
		for _, p := range md.Topics[topic].Partitions {
			rp, _ := rs.part(p.Partition)
			active := newestSegmentBase(c.Node(p.Leader).DataDir, topic, p.Partition)
			if rp.RemoteEnd < active {
				behind = append(behind, fmt.Sprintf("p%d remote_end %d < active base %d (hw %d)", p.Partition, rp.RemoteEnd, active, ends[p.Partition]))
			}
		}
		return len(behind) == 0, strings.Join(behind, "; ")
	}); !ok {
		t.Errorf("%s: uploads did not reach the active segments: %s", at(), msg)
	}
	t.Logf("%s: remote tier reached the active segments", at())

	// Local disk bounded near the window. While the load ran (outside the
	// outage and its catch-up) each broker holds at most the window's
	// bytes (produce rate x (window + 5 s), x1.2 for record overhead and
	// bursts), plus up to 3 segments per partition (the active one, one
	// sealed but not yet uploaded, one uploaded but waiting for the next
	// retention pass) and 64 MiB of indexes and slack.
	measuredRate := float64(load.ackedB.Load()) / load.end.Sub(load.start).Seconds()
	bound := int64(measuredRate*1.2*(window+5*time.Second).Seconds()) + int64(partitions)*3*segBytes + 64<<20
	stopSampling()
	diskMu.Lock()
	var maxIn, maxOut [3]int64
	for _, s := range samples {
		excluded := !s.at.Before(outageStart) && s.at.Before(caughtUp.Add(10*time.Second))
		for i, v := range s.bytes {
			if excluded {
				maxOut[i] = max(maxOut[i], v)
			} else {
				maxIn[i] = max(maxIn[i], v)
			}
		}
	}
	diskMu.Unlock()
	t.Logf("local disk bound while loading: %s (rate %.1f MB/s x 1.2 x %v + %d partitions x 3 x %s + 64 MiB); of %s produced",
		mib(bound), measuredRate/1e6, window+5*time.Second, partitions, mib(segBytes), mib(load.ackedB.Load()))
	for i := range c.Nodes {
		t.Logf("node %d: max local %s outside the outage, %s during the outage and catch-up", i+1, mib(maxIn[i]), mib(maxOut[i]))
		if maxIn[i] > bound {
			t.Errorf("node %d: local disk use %s above the bound %s", i+1, mib(maxIn[i]), mib(bound))
		}
	}
	if bound >= load.ackedB.Load() {
		t.Logf("note: the bound is not below the bytes produced; raise RINGLOG_TIERED_BYTES for a meaningful check")
	}

	// After the window passes with no load, only the active segments stay.
	// Real time: the check means nothing before the window has passed.
	time.Sleep(time.Until(load.end.Add(window + 8*time.Second)))
	finalBound := int64(partitions)*2*segBytes + 32<<20
	for i, b := range c.Nodes {
		n := topicDiskBytes(b.DataDir, topic)
		t.Logf("node %d: local %s once the window passed (bound %s)", i+1, mib(n), mib(finalBound))
		if n > finalBound {
			t.Errorf("node %d: local disk use %s after the window, above %s", i+1, mib(n), mib(finalBound))
		}
	}

	// The bucket holds the rest: each partition's committed segments cover
	// [0, remote_end) contiguously, no range twice.
	rs, err := remoteStateAny(c, topic)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, rp := range rs.Partitions {
		ov, ovOffsets, err := checkRemoteCoverage(rp)
		if err != nil {
			t.Errorf("remote segments: %v", err)
		}
		if rp.RemoteLogStart != 0 {
			t.Errorf("p%d: remote_log_start %d, want 0 (retention.ms is the default)", rp.Partition, rp.RemoteLogStart)
		}
		var size int64
		for _, s := range rp.Segments {
			size += s.SizeBytes
		}
		committed += size
		t.Logf("p%d: %d segments [%d, %d) %s, %d overlaps after leader changes (%d offsets twice), local start %d, hw %d",
			rp.Partition, len(rp.Segments), rp.RemoteLogStart, rp.RemoteEnd, mib(size), ov, ovOffsets, rp.LocalLogStart, ends[rp.Partition])
	}
	objs, err := s3.objects(rs.TopicID + "/")
	if err != nil {
		t.Fatal(err)
	}
	var bucketBytes int64
	kinds := map[string]int{}
	for _, o := range objs {
		bucketBytes += o.size
		kinds[o.key[strings.LastIndexByte(o.key, '.')+1:]]++
	}
	t.Logf("bucket: %d objects %v, %s; committed log bytes %s", len(objs), kinds, mib(bucketBytes), mib(committed))
	if min := load.ackedB.Load() - int64(partitions)*segBytes; committed < min {
		t.Errorf("committed remote bytes %s, want at least %s (acked %s less one segment per partition)", mib(committed), mib(min), mib(load.ackedB.Load()))
	}
	checkCommittedObjects(t, rs, objs)

	// Consume everything from offset 0, byte for byte.
	acks := load.ackSnapshot()
	readStart := time.Now()
	res, err := readBackAll(harness.Context(t, 6*time.Minute), c.Addrs(), topic, 0, ends, acks, valueSize)
	if err != nil {
		t.Errorf("read-back: %v", err)
	}
	if res != nil {
		d := time.Since(readStart)
		t.Logf("%s: franz-go read %d records (%d acked and identical, %d unacknowledged) in %v (%.1f MB/s)",
			at(), res.records, res.acked, res.unacked, d.Truncate(time.Millisecond), float64(res.records*valueSize)/d.Seconds()/1e6)
		for _, p := range res.problems {
			t.Errorf("read-back: %s", p)
		}
		if res.acked != load.acked.Load() {
			t.Errorf("read-back found %d of %d acknowledged records", res.acked, load.acked.Load())
		}
		leaders := map[int32]int32{}
		for _, p := range md.Topics[topic].Partitions {
			leaders[p.Partition] = p.Leader
		}
		checkWholeLogLookups(t, c, cl, leaders, topic, res, true)
	}
	readStart = time.Now()
	kres, err := readBackKcat(harness.Context(t, 4*time.Minute), c.Node(1).Addr, topic, 0, ends[0], acks[0], valueSize)
	if err != nil {
		t.Errorf("kcat read-back of p0: %v", err)
	}
	if kres != nil {
		t.Logf("%s: kcat read p0: %d records (%d acked and identical) in %v", at(), kres.records, kres.acked, time.Since(readStart).Truncate(time.Millisecond))
		for _, p := range kres.problems {
			t.Errorf("kcat read-back: %s", p)
		}
		if kres.acked != int64(len(acks[0])) {
			t.Errorf("kcat found %d of %d acknowledged records of p0", kres.acked, len(acks[0]))
		}
	}
	t.Logf("TestTieredIntegration took %v", time.Since(testStart).Truncate(time.Second))
}

func TestTieredReadErrors(t *testing.T) {
	harness.InProcess(t)
	const (
		topic     = "tiered-errs"
		delTopic  = "tiered-del"
		valueSize = 1024
		segBytes  = 256 << 10
	)
	s3, c, cl, adm := tieredSetup(t)
	cfg := map[string]*string{
		"min.insync.replicas":   kadm.StringPtr("2"),
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.ms":    kadm.StringPtr("1000"),
		"segment.bytes":         kadm.StringPtr(fmt.Sprint(segBytes)),
	}
	harness.CreateTopicWith(t, adm, topic, 1, 3, cfg)
	harness.CreateTopicWith(t, adm, delTopic, 1, 3, cfg)
	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs", func(m kadm.Metadata) bool {
		return harness.FullISR(topic, 1)(m) && harness.FullISR(delTopic, 1)(m)
	})
	ctx := harness.Context(t, 5*time.Minute)
	load := runTieredLoad(t, ctx, c.Addrs(), topic, 0, 6<<20, valueSize, 0)
	dload := runTieredLoad(t, ctx, c.Addrs(), delTopic, 0, 2<<20, valueSize, 0)
	load.wait(t, 2*time.Minute)
	dload.wait(t, 2*time.Minute)
	if load.errs+dload.errs > 0 {
		t.Fatalf("produce errors: %v %v", load.lastErr, dload.lastErr)
	}
	leader := harness.PartitionLeader(t, adm, topic, 1, 0)
	ends := harness.EndOffsets(t, adm, topic)

	// Wait until the leader's local log starts above five remote segments.
	var rs remoteTopicJSON
	var rp remotePartJSON
	if ok, msg := poll(90*time.Second, 500*time.Millisecond, func() (bool, string) {
		var err error
		if rs, err = remoteState(c.Node(leader).Admin, topic); err != nil {
			return false, err.Error()
		}
		rp, _ = rs.part(0)
		return len(rp.Segments) >= 6 && rp.LocalLogStart >= rp.Segments[4].NextOffset,
			fmt.Sprintf("%d segments, remote [%d, %d), local start %d", len(rp.Segments), rp.RemoteLogStart, rp.RemoteEnd, rp.LocalLogStart)
	}); !ok {
		t.Fatalf("remote tier not populated: %s", msg)
	}
	segs := slices.Clone(rp.Segments)
	sort.Slice(segs, func(i, j int) bool { return segs[i].BaseOffset < segs[j].BaseOffset })
	t.Logf("%d remote segments, remote [%d, %d), local start %d, hw %d", len(segs), rp.RemoteLogStart, rp.RemoteEnd, rp.LocalLogStart, ends[0])

	// Segment 1's log object is deleted, segment 3's replaced by garbage.
	missing, corrupt := segs[1], segs[3]
	if err := removeFile(s3.objectPath(segmentLogKey(t, s3, rs.TopicID, 0, missing))); err != nil {
		t.Fatal(err)
	}
	if err := s3.corruptObject(segmentLogKey(t, s3, rs.TopicID, 0, corrupt), 4096); err != nil {
		t.Fatal(err)
	}

	fctx := harness.Context(t, time.Minute)
	// Ranges whose objects are intact read fine, from the remote tier.
	for _, s := range []remoteSegJSON{segs[0], segs[2], segs[4]} {
		fp, err := fetchAt(fctx, cl, leader, topic, 0, s.BaseOffset)
		if err != nil {
			t.Fatalf("fetch at %d: %v", s.BaseOffset, err)
		}
		if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Errorf("fetch at %d (intact segment [%d, %d)): error %v, %d bytes", s.BaseOffset, s.BaseOffset, s.NextOffset, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
		}
	}
	// The missing object: KAFKA_STORAGE_ERROR, not data, not a hang.
	fp, err := fetchAt(fctx, cl, leader, topic, 0, missing.BaseOffset+1)
	if err != nil {
		t.Fatalf("fetch in the missing segment: %v", err)
	}
	if fp.ErrorCode != kerr.KafkaStorageError.Code {
		t.Errorf("fetch in the segment whose object is missing: %v (%d bytes), want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	// The corrupt object: an error, never the garbage as records.
	fp, err = fetchAt(fctx, cl, leader, topic, 0, corrupt.BaseOffset)
	if err != nil {
		t.Fatalf("fetch in the corrupt segment: %v", err)
	}
	switch fp.ErrorCode {
	case kerr.KafkaStorageError.Code, kerr.CorruptMessage.Code:
		t.Logf("corrupt object: %v", kerr.ErrorForCode(fp.ErrorCode))
	default:
		t.Errorf("fetch in the segment whose object is garbage: %v with %d bytes, want KAFKA_STORAGE_ERROR or CORRUPT_MESSAGE", kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	// franz-go surfaces the storage error to the application.
	cons := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.KeepRetryableFetchErrors(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(missing.BaseOffset)}}))
	var surfaced error
	for surfaced == nil && fctx.Err() == nil {
		fs := cons.PollFetches(fctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if err == kerr.KafkaStorageError {
				surfaced = err
			} else if fctx.Err() == nil {
				t.Logf("franz-go fetch error: %v", err)
			}
		})
		if n := len(fs.Records()); n > 0 {
			t.Errorf("franz-go got %d records from the segment whose object is missing (first offset %d)", n, fs.Records()[0].Offset)
			break
		}
	}
	if surfaced == nil {
		t.Errorf("franz-go did not surface KAFKA_STORAGE_ERROR for the missing object")
	}
	cons.Close()
	// Past the damaged segments everything reads, byte for byte.
	from := segs[4].BaseOffset
	res, err := readBackAll(harness.Context(t, time.Minute), c.Addrs(), topic, from, ends, load.ackSnapshot(), valueSize)
	if err != nil {
		t.Fatalf("read from %d: %v", from, err)
	}
	for _, p := range res.problems {
		t.Errorf("read from %d: %s", from, p)
	}
	t.Logf("read [%d, %d): %d records, %d acked and identical", from, ends[0], res.records, res.acked)

	// Remote retention: a short retention.ms expires the remote segments;
	// ListOffsets earliest moves up and their objects go.
	if err := harness.AlterErr(adm.AlterTopicConfigs(harness.Context(t, 10*time.Second), []kadm.AlterConfig{harness.SetConfig("retention.ms", "1000")}, topic)); err != nil {
		t.Fatal(err)
	}
	if ok, msg := poll(60*time.Second, 500*time.Millisecond, func() (bool, string) {
		so, err := adm.ListStartOffsets(harness.Context(t, 5*time.Second), topic)
		if err == nil {
			err = so.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		o, _ := so.Lookup(topic, 0)
		return o.Offset >= segs[len(segs)-1].NextOffset, fmt.Sprintf("earliest %d", o.Offset)
	}); !ok {
		t.Errorf("ListOffsets earliest did not move past the remote segments after retention.ms=1000: %s (want >= %d)", msg, segs[len(segs)-1].NextOffset)
	}
	if ok, msg := poll(60*time.Second, time.Second, func() (bool, string) {
		left := 0
		for _, s := range segs {
			objs, _ := s3.objects(fmt.Sprintf("%s/0/%020d-%s.", rs.TopicID, s.BaseOffset, s.ID))
			left += len(objs)
		}
		r, err := remoteState(c.Node(leader).Admin, topic)
		p, _ := r.part(0)
		return left == 0, fmt.Sprintf("%d objects of expired segments left; remote [%d, %d) %d segments listed (%v)", left, p.RemoteLogStart, p.RemoteEnd, len(p.Segments), err)
	}); !ok {
		t.Errorf("remote retention did not delete the expired objects: %s", msg)
	}
	// Reading below the new start is out of range, not a storage error.
	if fp, err := fetchAt(fctx, cl, leader, topic, 0, segs[2].BaseOffset); err != nil || fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch below the remote log start after retention: %v / %v, want OFFSET_OUT_OF_RANGE", err, kerr.ErrorForCode(fp.ErrorCode))
	}

	// DeleteTopic removes the topic's objects from the bucket.
	drs, err := remoteState(c.Node(leader).Admin, delTopic)
	if err != nil {
		t.Fatal(err)
	}
	if ok, msg := poll(60*time.Second, 500*time.Millisecond, func() (bool, string) {
		objs, _ := s3.objects(drs.TopicID + "/")
		return len(objs) > 0, fmt.Sprintf("%d objects", len(objs))
	}); !ok {
		t.Fatalf("%s has no remote objects to delete: %s", delTopic, msg)
	}
	if _, err := adm.DeleteTopics(harness.Context(t, 30*time.Second), delTopic); err != nil {
		t.Fatal(err)
	}
	if ok, msg := poll(60*time.Second, 500*time.Millisecond, func() (bool, string) {
		objs, _ := s3.objects(drs.TopicID + "/")
		return len(objs) == 0, fmt.Sprintf("%d objects of %s (id %s) left", len(objs), delTopic, drs.TopicID)
	}); !ok {
		t.Errorf("DeleteTopic did not remove the remote objects: %s", msg)
	}
}

func TestTieredFollowerCatchUp(t *testing.T) {
	const (
		topic     = "tiered-catchup"
		valueSize = 1024
		segBytes  = 256 << 10
	)
	_, c, cl, adm := tieredSetup(t)
	// Two replicas on nodes 2 and 3: with one of them down the other
	// leads alone (min.insync.replicas 1), and the three controller
	// voters keep a quorum whichever of them is down.
	harness.CreateAssigned(t, cl, topic, [][]int32{{2, 3}}, map[string]string{
		"min.insync.replicas":   "1",
		"remote.storage.enable": "true",
		"local.retention.ms":    "2000",
		"segment.bytes":         fmt.Sprint(segBytes),
	})
	md := harness.WaitMetadata(t, adm, 30*time.Second, "full ISR", func(m kadm.Metadata) bool {
		ps := m.Topics[topic].Partitions
		return len(ps) == 1 && ps[0].Leader >= 0 && len(ps[0].ISR) == 2
	})
	leader := md.Topics[topic].Partitions[0].Leader
	lagger := int32(5) - leader // the other of 2 and 3
	ctx := harness.Context(t, 5*time.Minute)

	l1 := runTieredLoad(t, ctx, c.Addrs(), topic, 0, 1<<20, valueSize, 0)
	l1.wait(t, time.Minute)
	endDown := harness.EndOffsets(t, adm, topic)[0]
	t.Logf("node %d leads; stopping node %d at offset %d", leader, lagger, endDown)
	c.Node(lagger).Kill9()

	// While it is down, the leader rolls, uploads and deletes locally
	// far past where the lagger stopped.
	l2 := runTieredLoad(t, ctx, c.Addrs(), topic, 1_000_000, 8<<20, valueSize, 0)
	l2.wait(t, 2*time.Minute)
	if l1.errs+l2.errs > 0 {
		t.Fatalf("produce errors: %v %v", l1.lastErr, l2.lastErr)
	}
	if ok, msg := poll(90*time.Second, 500*time.Millisecond, func() (bool, string) {
		rs, err := remoteState(c.Node(leader).Admin, topic)
		if err != nil {
			return false, err.Error()
		}
		rp, _ := rs.part(0)
		return rp.LocalLogStart > endDown+1000, fmt.Sprintf("leader local start %d, remote [%d, %d)", rp.LocalLogStart, rp.RemoteLogStart, rp.RemoteEnd)
	}); !ok {
		t.Fatalf("the leader's local log did not move past the lagger's end %d: %s", endDown, msg)
	}

	// The lagger comes back below the leader's local start: it must
	// restart from the remote tier (OFFSET_MOVED_TO_TIERED_STORAGE) and
	// rejoin the ISR.
	back := time.Now()
	c.Node(lagger).Restart()
	harness.WaitMetadata(t, adm, 90*time.Second, "the lagger back in the ISR", func(m kadm.Metadata) bool {
		ps := m.Topics[topic].Partitions
		return len(ps) == 1 && slices.Contains(ps[0].ISR, lagger)
	})
	t.Logf("node %d back in the ISR after %v", lagger, time.Since(back).Truncate(time.Millisecond))
	if rs, err := remoteState(c.Node(lagger).Admin, topic); err != nil {
		t.Errorf("remote state on node %d: %v", lagger, err)
	} else if rp, _ := rs.part(0); rp.LocalLogStart <= endDown {
		t.Errorf("node %d local log start %d: it did not restart from the remote tier (stopped at %d)", lagger, rp.LocalLogStart, endDown)
	} else {
		t.Logf("node %d local log starts at %d (stopped at %d)", lagger, rp.LocalLogStart, endDown)
	}
	if log := c.Node(lagger).Out.String(); !strings.Contains(strings.ToLower(log), "tiered") && !strings.Contains(strings.ToLower(log), "remote") {
		t.Logf("note: node %d's log says nothing of the remote restart", lagger)
	}

	// It can lead: the old leader dies, the lagger takes over, serves the
	// whole log (remote and local) and uploads what it is given.
	ends := harness.EndOffsets(t, adm, topic)
	c.Node(leader).Kill9()
	harness.WaitMetadata(t, adm, 60*time.Second, "the lagger leads", func(m kadm.Metadata) bool {
		ps := m.Topics[topic].Partitions
		return len(ps) == 1 && ps[0].Leader == lagger
	})
	rs0, _ := remoteState(c.Node(lagger).Admin, topic)
	rp0, _ := rs0.part(0)
	l3 := runTieredLoad(t, ctx, c.Addrs(leader), topic, 2_000_000, 1<<20, valueSize, 0)
	l3.wait(t, time.Minute)
	if l3.errs > 0 {
		t.Fatalf("produce to the new leader: %v", l3.lastErr)
	}
	ends = harness.EndOffsets(t, adm, topic)
	res, err := readBackAll(harness.Context(t, 2*time.Minute), c.Addrs(leader), topic, 0, ends, mergeAcks(l1, l2, l3), valueSize)
	if err != nil {
		t.Fatalf("read-back from the new leader: %v", err)
	}
	for _, p := range res.problems {
		t.Errorf("read-back: %s", p)
	}
	t.Logf("read [0, %d) from node %d: %d records, %d acked and identical", ends[0], lagger, res.records, res.acked)
	// Its leader-epoch history reaches below its local log (restored from
	// the remote tier at its restart).
	checkWholeLogLookups(t, c, cl, map[int32]int32{0: lagger}, topic, res, false)
	if want := l1.acked.Load() + l2.acked.Load() + l3.acked.Load(); res.acked != want {
		t.Errorf("read-back found %d of %d acknowledged records", res.acked, want)
	}
	if ok, msg := poll(60*time.Second, time.Second, func() (bool, string) {
		rs, err := remoteState(c.Node(lagger).Admin, topic)
		if err != nil {
			return false, err.Error()
		}
		rp, _ := rs.part(0)
		return rp.RemoteEnd > rp0.RemoteEnd, fmt.Sprintf("remote_end %d (was %d when it took over)", rp.RemoteEnd, rp0.RemoteEnd)
	}); !ok {
		t.Errorf("the new leader does not upload: %s", msg)
	}
	if rs, err := remoteState(c.Node(lagger).Admin, topic); err == nil {
		rp, _ := rs.part(0)
		if ov, _, err := checkRemoteCoverage(rp); err != nil {
			t.Errorf("remote segments after the leader change: %v", err)
		} else {
			t.Logf("remote [%d, %d) in %d segments, %d overlaps at the leader change", rp.RemoteLogStart, rp.RemoteEnd, len(rp.Segments), ov)
		}
	}
}
