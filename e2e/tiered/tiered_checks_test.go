package tiered

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkCommittedObjects checks that every live committed segment has its
// log object in the bucket, and reports objects no segment lists
// (orphans of an upload cut short by the kill, for the sweep).
func checkCommittedObjects(t *testing.T, rs remoteTopicJSON, objs []s3Object) {
	t.Helper()
	have := map[string]bool{}
	for _, o := range objs {
		have[o.key] = true
	}
	listed := map[string]bool{}
	for _, rp := range rs.Partitions {
		for _, s := range rp.Segments {
			listed[s.ID] = true
			if s.NextOffset <= rp.RemoteLogStart {
				continue
			}
			key := fmt.Sprintf("%s/%d/%020d-%s.log", rs.TopicID, rp.Partition, s.BaseOffset, s.ID)
			if !have[key] {
				t.Errorf("p%d: committed segment %s [%d, %d) has no log object %s", rp.Partition, s.ID, s.BaseOffset, s.NextOffset, key)
			}
		}
	}
	orphans := 0
	for _, o := range objs {
		name := o.key[strings.LastIndexByte(o.key, '/')+1:]
		_, rest, _ := strings.Cut(name, "-")
		id, _, _ := strings.Cut(rest, ".")
		if !listed[id] {
			orphans++
		}
	}
	t.Logf("bucket objects of no committed segment (orphans): %d", orphans)
}

// fetchAt sends one raw Fetch (v12, the topic by name) for topic/p at
// offset to broker id and returns the partition's answer.
func fetchAt(ctx context.Context, cl *kgo.Client, id int32, topic string, p int32, offset int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MaxBytes = 4 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("fetch answer with %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0], nil
}

// segmentLogKey finds the key of a segment's log object in the bucket.
func segmentLogKey(t *testing.T, s3 *s3Proc, topicID string, p int32, s remoteSegJSON) string {
	t.Helper()
	key := fmt.Sprintf("%s/%d/%020d-%s.log", topicID, p, s.BaseOffset, s.ID)
	objs, err := s3.objects(key)
	if err != nil || len(objs) != 1 {
		all, _ := s3.objects(fmt.Sprintf("%s/%d/", topicID, p))
		var keys []string
		for _, o := range all {
			keys = append(keys, o.key)
		}
		t.Fatalf("log object %s of segment [%d, %d): found %d (%v); the partition's objects: %v", key, s.BaseOffset, s.NextOffset, len(objs), err, keys)
	}
	return key
}

// listOffsetAt sends one raw ListOffsets (v9, for -4 and -5) to broker id.
func listOffsetAt(ctx context.Context, cl *kgo.Client, id int32, topic string, p int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(9)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets answer with %d topics", len(resp.Topics))
	}
	rpp := resp.Topics[0].Partitions[0]
	return rpp.Offset, kerr.ErrorForCode(rpp.ErrorCode)
}

// checkWholeLogLookups asks each partition's leader the lookups that must
// see the remote tier as well as the local log: ListOffsets earliest (-2:
// the whole log's start), earliest-local (-4), latest-tiered (-5), by the
// timestamps of records sampled through the log, and OffsetForLeaderEpoch
// of every epoch but the last, against what the read-back saw. ends
// false skips -2/-4/-5, for a log whose ends may still move.
func checkWholeLogLookups(t *testing.T, c *harness.Cluster, cl *kgo.Client, leaders map[int32]int32, topic string, res *readBackResult, ends bool) {
	t.Helper()
	ctx := harness.Context(t, 2*time.Minute)
	var tsRemote, tsLocal, epochChecks int
	for p, pc := range res.checkers {
		leader := leaders[p]
		rs, err := remoteState(c.Node(leader).Admin, topic)
		if err != nil {
			t.Errorf("remote state on node %d: %v", leader, err)
			continue
		}
		rp, _ := rs.part(p)
		want := map[int64]int64{-2: max(rp.RemoteLogStart, 0), -4: rp.LocalLogStart, -5: rp.RemoteEnd - 1}
		for _, ts := range []int64{-2, -4, -5} {
			if !ends {
				break
			}
			if o, err := listOffsetAt(ctx, cl, leader, topic, p, ts); err != nil || o != want[ts] {
				t.Errorf("p%d ListOffsets %d on node %d: %d (%v), want %d", p, ts, leader, o, err, want[ts])
			}
		}
		if pc.tsBackwards {
			t.Logf("p%d: record timestamps go backwards; timestamp lookups not checked", p)
		}
		for _, s := range pc.tsSamples {
			o, err := listOffsetAt(ctx, cl, leader, topic, p, s.ts)
			// Kafka answers the first record stamped >= ts; an answer at
			// batch granularity may start up to one timestamp run early.
			if err != nil || o > s.runStart || o < s.prevRun {
				t.Errorf("p%d ListOffsets timestamp %d (of offset %d, run from %d, previous run from %d): %d (%v)", p, s.ts, s.offset, s.runStart, s.prevRun, o, err)
			}
			if s.offset < rp.LocalLogStart {
				tsRemote++
			} else {
				tsLocal++
			}
		}
		for i := 0; i+1 < len(pc.epochs); i++ {
			e, next := pc.epochs[i], pc.epochs[i+1]
			if end := harness.OffsetForLeaderEpoch(t, c.Node(leader), topic, p, e.epoch); end != next.offset {
				t.Errorf("p%d OffsetForLeaderEpoch %d on node %d: end %d, want %d (epoch %d starts there; local log starts at %d)", p, e.epoch, leader, end, next.offset, next.epoch, rp.LocalLogStart)
			}
			epochChecks++
		}
	}
	what := "no -2/-4/-5"
	if ends {
		what = fmt.Sprintf("-2/-4/-5 on %d partitions", len(res.checkers))
	}
	t.Logf("whole-log lookups: %d timestamps in the remote tier and %d local, %d leader epochs, %s", tsRemote, tsLocal, epochChecks, what)
}

// TestTieredS3Process checks the harness the other tiered tests stand on:
// the S3 server process keeps objects across a kill and a restart on the
// same address, a frozen or killed server fails requests (bounded by the
// client's deadline) instead of answering, and the object helpers (list,
// delete, corrupt) act on what a client sees.
func TestTieredS3Process(t *testing.T) {
	s3 := startS3(t)
	ctx := harness.Context(t, time.Minute)
	st, err := objstore.NewS3(ctx, objstore.S3Config{Endpoint: s3.ready.Endpoint, Bucket: s3.ready.Bucket,
		AccessKey: s3.ready.AccessKey, SecretKey: s3.ready.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	data := tieredValue(1, 100_000)
	put := func(key string, limit time.Duration) error {
		c, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return st.Put(c, key, bytes.NewReader(data), int64(len(data)))
	}
	get := func(key string) ([]byte, error) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := st.GetRange(c, key, 0, -1)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	for _, k := range []string{"t/0/a.log", "t/0/b.log", "u/0/c.log"} {
		if err := put(k, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if objs, err := s3.objects("t/"); err != nil || len(objs) != 2 {
		t.Fatalf("objects under t/: %v %v", objs, err)
	}
	s3.pause()
	if err := put("t/0/frozen.log", 2*time.Second); err == nil {
		t.Errorf("a Put to a frozen server succeeded")
	}
	s3.kill()
	if err := put("t/0/dead.log", 2*time.Second); err == nil {
		t.Errorf("a Put to a killed server succeeded")
	}
	addr := s3.addr
	s3.restart()
	if s3.addr != addr {
		t.Fatalf("restarted on %s, was %s", s3.addr, addr)
	}
	if got, err := get("t/0/a.log"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after restart: %d bytes, %v", len(got), err)
	}
	if err := s3.corruptObject("t/0/a.log", 4096); err != nil {
		t.Fatal(err)
	}
	if got, err := get("t/0/a.log"); err != nil || len(got) != 4096 || bytes.Equal(got, data[:4096]) {
		t.Errorf("corrupt object: %d bytes, %v", len(got), err)
	}
	if err := removeFile(s3.objectPath("t/0/b.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := get("t/0/b.log"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("deleted object: %v, want ErrNotFound", err)
	}
}
