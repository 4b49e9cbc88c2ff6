package core

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeIdempotentBatch is encodeBatch for producer pid at sequence seq.
func encodeIdempotentBatch(pid int64, epoch int16, seq int32, n int, value []byte) []byte {
	raw := harness.EncodeBatch(n, value)
	binary.BigEndian.PutUint64(raw[43:], uint64(pid))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(seq))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// produceRawOffset sends one acks=all produce of records to partition 0
// and returns the partition's error code and base offset.
func produceRawOffset(t *testing.T, cl *kgo.Client, topic string, records []byte) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

func initProducerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// TestIdempotentRetryIsDeduplicated sends the same idempotent batch again,
// as a client does when an acknowledgement is lost, before and after a
// clean restart and a kill -9: each retry gets the original offset and the
// log holds the records once.
func TestIdempotentRetryIsDeduplicated(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9 and restart
	b := harness.StartBroker(t, t.TempDir(), "--segment-bytes", "2048")
	cl := b.Client(t, kgo.DisableIdempotentWrite())
	const topic = "idem"
	harness.CreateTopic(t, kadm.NewClient(cl), topic, 1, 1)

	pid, epoch := initProducerID(t, cl)
	pid2, _ := initProducerID(t, cl)
	if pid < 0 || epoch != 0 || pid2 == pid {
		t.Fatalf("InitProducerId gave %d/%d then %d: ids must be fresh", pid, epoch, pid2)
	}
	var batches [][]byte
	var offsets []int64
	for seq := int32(0); seq < 30; seq += 3 {
		batch := encodeIdempotentBatch(pid, epoch, seq, 3, fmt.Appendf(nil, "seq-%d", seq))
		code, off := produceRawOffset(t, cl, topic, append([]byte(nil), batch...))
		if code != 0 {
			t.Fatalf("seq %d: %v", seq, kerr.ErrorForCode(code))
		}
		batches, offsets = append(batches, batch), append(offsets, off)
	}
	retry := func(when string) {
		t.Helper()
		// The last batch is within the 5 the broker remembers.
		last := len(batches) - 1
		code, off := produceRawOffset(t, cl, topic, append([]byte(nil), batches[last]...))
		if code != 0 || off != offsets[last] {
			t.Fatalf("%s: retry answered %v at offset %d, original offset %d", when, kerr.ErrorForCode(code), off, offsets[last])
		}
		gap := encodeIdempotentBatch(pid, epoch, 99, 1, []byte("gap"))
		if code, _ := produceRawOffset(t, cl, topic, gap); code != kerr.OutOfOrderSequenceNumber.Code {
			t.Fatalf("%s: sequence gap answered %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", when, kerr.ErrorForCode(code))
		}
		recs := harness.ConsumeAll(harness.Context(t, 20*time.Second), t, b.Addr, topic, 30)
		if len(recs) != 30 || recs[29].Offset != 29 {
			t.Fatalf("%s: %d records in the log, want 30", when, len(recs))
		}
	}
	retry("live")
	b.Stop()
	b.Restart()
	cl = b.Client(t, kgo.DisableIdempotentWrite())
	retry("after a clean restart")
	b.Kill9()
	b.Restart()
	cl = b.Client(t, kgo.DisableIdempotentWrite())
	retry("after kill -9")
}

// TestIdempotentProducerAcrossLeaderKill runs franz-go idempotent
// producers (its default) with unlimited retries against an RF=3 topic and
// kills the busiest partition's leader with kill -9 mid-stream: requests
// in flight to the dead leader are retried to the new one, which must
// recognize the batches the old leader had already replicated. Every
// (key, sequence) must be in the log exactly once, in order per key.
func TestIdempotentProducerAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9 and restart
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	c := harness.StartReplCluster(t, 3)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	const topic, partitions, keys, perKey = "idem-kill", 2, 8, 400
	m := harness.CreateRF3Topic(t, adm, topic, partitions)
	victim := m.Topics[topic].Partitions[0].Leader

	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProduceRequestTimeout(3*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	ctx := harness.Context(t, 90*time.Second)
	var (
		wg      sync.WaitGroup
		failed  atomic.Int64
		firstEr atomic.Value
		sent    atomic.Int64
	)
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 50 records each 20 ms per key, so the stream lasts past
			// the kill.
			pace := time.NewTicker(20 * time.Millisecond)
			defer pace.Stop()
			for seq := range perKey {
				r := &kgo.Record{Topic: topic, Partition: int32(k % partitions), Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(strconv.Itoa(seq))}
				// Several records in flight per key: retries of
				// pipelined batches are what dedupe must handle.
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						firstEr.CompareAndSwap(nil, err)
					}
					sent.Add(1)
				})
				if seq%50 == 49 {
					<-pace.C
				}
			}
		}()
	}
	// Mid-stream: a quarter of the records answered, the rest to come.
	harness.Eventually(t, 30*time.Second, "a quarter of the records answered", func() (bool, string) {
		n := sent.Load()
		return n >= keys*perKey/4, fmt.Sprintf("%d of %d", n, keys*perKey)
	})
	t.Logf("kill -9 node %d (leader of %s-0) after %d records", victim, topic, sent.Load())
	c.Node(victim).Kill9()
	wg.Wait()
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d records failed (idempotent producers retry until delivered): %v", n, firstEr.Load())
	}
	c.Node(victim).Restart()

	// Read everything back from the survivors' leaders.
	got := map[string][]int{}
	recs := harness.ConsumeAll(harness.Context(t, 60*time.Second), t, c.Node(1+victim%3).Addr, topic, keys*perKey,
		kgo.SeedBrokers(c.Addrs(victim)...))
	for _, r := range recs {
		seq, _ := strconv.Atoi(string(r.Value))
		got[string(r.Key)] = append(got[string(r.Key)], seq)
	}
	dups, gaps := 0, 0
	var problems []string
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		seqs := got[key]
		for i, s := range seqs {
			if s != i {
				if s < i {
					dups++
				} else {
					gaps++
				}
				problems = append(problems, fmt.Sprintf("%s: position %d holds sequence %d", key, i, s))
				break
			}
		}
		if len(seqs) != perKey {
			problems = append(problems, fmt.Sprintf("%s: %d records, want %d", key, len(seqs), perKey))
		}
	}
	// consumeAll stops at the expected count: the end offsets show
	// whether the log holds more (each record takes one offset here).
	ends, err := adm.ListEndOffsets(harness.Context(t, 20*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != keys*perKey {
		dups += int(total - keys*perKey)
		problems = append(problems, fmt.Sprintf("the partitions end at %d offsets in all, want %d", total, keys*perKey))
	}
	fmt.Printf("idempotent-leader-kill: records=%d read=%d log_offsets=%d duplicated=%d reordered_or_lost=%d\n", keys*perKey, len(recs), total, dups, gaps)
	if len(problems) > 0 {
		t.Fatalf("log does not hold every record exactly once in order:\n%s", strings.Join(problems, "\n"))
	}
}
