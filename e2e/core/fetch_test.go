package core

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand"
	"net"
	"path/filepath"
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

// testValue is a deterministic, incompressible-ish value for record i.
func testValue(i int) []byte {
	rng := rand.New(rand.NewSource(int64(i)))
	v := make([]byte, 64+rng.Intn(6000))
	rng.Read(v)
	copy(v, fmt.Sprintf("rec-%08d|", i))
	return v
}

// produceRecords produces n records over partitions and returns them
// indexed by partition and offset.
func produceRecords(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n int) map[int32]map[int64]*kgo.Record {
	t.Helper()
	out := make(map[int32]map[int64]*kgo.Record)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for i := 0; i < n; i++ {
		r := &kgo.Record{
			Topic:   topic,
			Key:     []byte(fmt.Sprintf("key-%d", i)),
			Value:   testValue(i),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}},
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			if out[r.Partition] == nil {
				out[r.Partition] = make(map[int64]*kgo.Record)
			}
			out[r.Partition][r.Offset] = r
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	return out
}

// sameRecord compares what a consumer got with what was produced.
func sameRecord(want, got *kgo.Record) error {
	switch {
	case !bytes.Equal(want.Key, got.Key):
		return fmt.Errorf("key %q, want %q", got.Key, want.Key)
	case !bytes.Equal(want.Value, got.Value):
		return fmt.Errorf("value differs (len %d, want %d)", len(got.Value), len(want.Value))
	case len(want.Headers) != len(got.Headers):
		return fmt.Errorf("%d headers, want %d", len(got.Headers), len(want.Headers))
	case !want.Timestamp.Equal(got.Timestamp):
		return fmt.Errorf("timestamp %v, want %v", got.Timestamp, want.Timestamp)
	}
	for i := range want.Headers {
		if want.Headers[i].Key != got.Headers[i].Key || !bytes.Equal(want.Headers[i].Value, got.Headers[i].Value) {
			return fmt.Errorf("header %d differs", i)
		}
	}
	return nil
}

// countSegments counts .log files of a topic's partitions under dataDir.
func countSegments(t *testing.T, dataDir, topic string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") && strings.Contains(path, topic) {
			n++
		}
		return nil
	})
	return n
}

func TestFetchByteExactAcrossSegmentsConcurrentConsumers(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	b, certs := harness.StartTLSBroker(t, dataDir, false, "--fsync", "never")
	ctx := harness.Context(t, 120*time.Second)

	const (
		topic      = "exact"
		partitions = 3
		records    = 1500
		consumers  = 8 // per listener
	)
	adm := kadm.NewClient(b.Client(t))
	// 64 KiB segments: every partition rolls dozens of times, so fetches
	// regularly start near the end of one segment and continue in the next.
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"segment.bytes": kadm.StringPtr("65536")}, topic); err != nil {
		t.Fatal(err)
	}
	// Small batches: many batch boundaries per segment for responses to
	// end on.
	prod := b.Client(t, kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	want := produceRecords(ctx, t, prod, topic, records)
	if segs := countSegments(t, dataDir, topic); segs < 10*partitions {
		t.Fatalf("only %d segments: the test needs segment rolls", segs)
	}

	// Vary response sizes so responses end at different batch boundaries:
	// from one batch per partition up to several MB.
	consumeExactOnBothListeners(ctx, t, b, certs, topic, partitions, want, records, consumers, func(i int) (int32, int32) {
		maxPart := int32(8<<10) << (2 * (i % 4))
		return maxPart, 4 * maxPart
	})
	var size int
	for _, recs := range want {
		for _, r := range recs {
			size += len(r.Value)
		}
	}
	t.Logf("%d consumers per listener each verified %d records (%d value bytes) across %d segments",
		consumers, records, size, countSegments(t, dataDir, topic))
}

// consumeExactOnBothListeners runs perListener concurrent consumers on each
// of b's plaintext and TLS listeners, each reading every partition of
// topic from the start with the fetch limits sizes gives consumer i
// (per partition, per response), and fails t for every consumer that does
// not read all total records of want byte-exact and in offset order.
func consumeExactOnBothListeners(ctx context.Context, t *testing.T, b *harness.BrokerProc, certs harness.TLSFiles, topic string, partitions int,
	want map[int32]map[int64]*kgo.Record, total, perListener int, sizes func(i int) (maxPart, maxBytes int32)) {
	t.Helper()
	type listenerCase struct {
		name string
		opts []kgo.Opt
	}
	cases := []listenerCase{
		{"plaintext", []kgo.Opt{kgo.SeedBrokers(b.Addr)}},
		{"tls", []kgo.Opt{kgo.SeedBrokers(b.TLSAddr), kgo.DialTLSConfig(certs.ClientConfig(t, false))}},
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := int32(0); p < int32(partitions); p++ {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(cases)*perListener)
	for _, lc := range cases {
		for i := 0; i < perListener; i++ {
			maxPart, maxBytes := sizes(i)
			opts := append([]kgo.Opt{
				kgo.ConsumePartitions(offsets),
				kgo.FetchMaxPartitionBytes(maxPart),
				kgo.FetchMaxBytes(maxBytes),
			}, lc.opts...)
			wg.Add(1)
			go func(name string, id int) {
				defer wg.Done()
				errs <- consumeExact(ctx, name, id, want, total, opts)
			}(lc.name, i)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// consumeExact reads every partition from the start until all records
// arrived, checking each byte-for-byte and in offset order.
func consumeExact(ctx context.Context, listener string, id int, want map[int32]map[int64]*kgo.Record, total int, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := make(map[int32]int64)
	got := 0
	for got < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("%s consumer %d: %d of %d records before timeout", listener, id, got, total)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = fmt.Errorf("%s consumer %d: fetch error %s/%d: %w", listener, id, topic, p, err)
		})
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			if r.Offset != next[r.Partition] {
				return fmt.Errorf("%s consumer %d: partition %d offset %d, want %d", listener, id, r.Partition, r.Offset, next[r.Partition])
			}
			w := want[r.Partition][r.Offset]
			if w == nil {
				return fmt.Errorf("%s consumer %d: unexpected record %d/%d", listener, id, r.Partition, r.Offset)
			}
			if err := sameRecord(w, r); err != nil {
				return fmt.Errorf("%s consumer %d: record %d/%d: %w", listener, id, r.Partition, r.Offset, err)
			}
			next[r.Partition]++
			got++
		}
	}
	return nil
}

// TestFetchRacingRetention fetches the oldest data over and over while
// retention deletes segments underneath. Every response must decode, and
// each partition must hold either whole, CRC-valid, contiguous batches or
// OFFSET_OUT_OF_RANGE: never a short or torn body.
func TestFetchRacingRetention(t *testing.T) {
	t.Parallel()
	b, certs := harness.StartTLSBroker(t, t.TempDir(), false, "--fsync", "never", "--retention-check-interval", "20ms")
	ctx := harness.Context(t, 60*time.Second)
	const topic = "race"
	adm := kadm.NewClient(b.Client(t))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"segment.bytes": kadm.StringPtr("16384"),
		"retention.ms":  kadm.StringPtr("60"),
	}, topic); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var produced atomic.Int64
	var prodWG sync.WaitGroup
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		defer close(stop)
		prod := b.Client(t, kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))
		deadline := time.Now().Add(3 * time.Second)
		for i := 0; i < 200000 && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
			recs := make([]*kgo.Record, 8)
			for j := range recs {
				v := make([]byte, 1024)
				copy(v, testValue(i*8+j))
				recs[j] = &kgo.Record{Value: v}
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			produced.Add(int64(len(recs)))
		}
	}()

	var (
		wg        sync.WaitGroup
		outOfRng  atomic.Int64
		okBatches atomic.Int64
	)
	fetchers := []struct {
		name string
		opts []kgo.Opt
	}{
		{"plaintext", []kgo.Opt{kgo.SeedBrokers(b.Addr)}},
		{"plaintext", []kgo.Opt{kgo.SeedBrokers(b.Addr)}},
		{"tls", []kgo.Opt{kgo.SeedBrokers(b.TLSAddr), kgo.DialTLSConfig(certs.ClientConfig(t, false))}},
		{"tls", []kgo.Opt{kgo.SeedBrokers(b.TLSAddr), kgo.DialTLSConfig(certs.ClientConfig(t, false))}},
	}
	for i, f := range fetchers {
		cl := b.Client(t, f.opts...)
		wg.Add(1)
		go func(id int, name string) {
			defer wg.Done()
			if err := fetchOldest(ctx, cl, topic, id, stop, &outOfRng, &okBatches); err != nil {
				t.Errorf("%s fetcher %d: %v", name, id, err)
			}
		}(i, f.name)
	}
	prodWG.Wait()
	wg.Wait()

	lo, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := lo.Lookup(topic, 0)
	t.Logf("produced %d records, log start now %d, %d whole batches fetched, %d OFFSET_OUT_OF_RANGE", produced.Load(), start.Offset, okBatches.Load(), outOfRng.Load())
	if start.Offset == 0 {
		t.Fatal("retention deleted nothing: the race was not exercised")
	}
	if okBatches.Load() == 0 {
		t.Fatal("no batches fetched")
	}
}

// fetchOldest loops fetch requests from the log start (jumping back there
// whenever it catches up) until stop, validating every response.
func fetchOldest(ctx context.Context, cl *kgo.Client, topic string, seed int, stop <-chan struct{}, oor, ok *atomic.Int64) error {
	rng := rand.New(rand.NewSource(int64(seed)))
	var offset int64
	for i := 0; i < 100000; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 20
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = []int32{1 << 10, 8 << 10, 64 << 10, 512 << 10}[rng.Intn(4)]
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := req.RequestWith(ctx, cl)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A torn response desynchronises the connection and surfaces
			// here as a decode or read error.
			return fmt.Errorf("fetch at %d: %w", offset, err)
		}
		if len(kresp.Topics) != 1 || len(kresp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("fetch at %d: response shape %+v", offset, kresp)
		}
		p := kresp.Topics[0].Partitions[0]
		switch err := kerr.ErrorForCode(p.ErrorCode); {
		case errors.Is(err, kerr.OffsetOutOfRange):
			if len(p.RecordBatches) != 0 {
				return fmt.Errorf("OFFSET_OUT_OF_RANGE with %d record bytes", len(p.RecordBatches))
			}
			oor.Add(1)
			offset = max(p.LogStartOffset, 0)
			continue
		case err != nil:
			return fmt.Errorf("fetch at %d: %w", offset, err)
		}
		if len(p.RecordBatches) == 0 {
			offset = max(p.LogStartOffset, 0) // caught up: back to the oldest data
			continue
		}
		next, n, err := checkBatches(p.RecordBatches, offset)
		if err != nil {
			return fmt.Errorf("fetch at %d (%d bytes): %w", offset, len(p.RecordBatches), err)
		}
		ok.Add(int64(n))
		offset = next
		// The producer outpaces the fetchers, so they would tail the log
		// far from the segments being deleted: jump back to the oldest
		// data often, and now and then to offset 0, long gone.
		switch rng.Intn(8) {
		case 0:
			offset = max(p.LogStartOffset, 0)
		case 1:
			offset = 0
		}
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkBatches verifies that b is a sequence of whole v2 record batches
// with valid CRCs, contiguous offsets, the first covering offset. It
// returns the offset after the last batch and the number of batches.
func checkBatches(b []byte, offset int64) (int64, int, error) {
	next, n := offset, 0
	for len(b) > 0 {
		if len(b) < 61 {
			return 0, n, fmt.Errorf("torn: %d trailing bytes", len(b))
		}
		base := int64(binary.BigEndian.Uint64(b[0:]))
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < 61 || size > len(b) {
			return 0, n, fmt.Errorf("torn: batch at %d claims %d bytes, %d left", base, size, len(b))
		}
		if b[16] != 2 {
			return 0, n, fmt.Errorf("batch at %d: magic %d", base, b[16])
		}
		if crc := binary.BigEndian.Uint32(b[17:]); crc32.Checksum(b[21:size], castagnoli) != crc {
			return 0, n, fmt.Errorf("batch at %d: CRC mismatch", base)
		}
		last := base + int64(int32(binary.BigEndian.Uint32(b[23:])))
		if n == 0 && (base > offset || last < offset) {
			return 0, n, fmt.Errorf("first batch [%d, %d] does not hold offset %d", base, last, offset)
		}
		if n > 0 && base != next {
			return 0, n, fmt.Errorf("batch at %d, want %d", base, next)
		}
		next = last + 1
		b = b[size:]
		n++
	}
	return next, n, nil
}

// TestFetchPathCounters is the zero-copy proof without strace: the broker
// counts bytes sent with sendfile and bytes copied through user space.
func TestFetchPathCounters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		extra      []string
		listener   string
		sent, idle string // path that must carry the records, path that must stay 0
		small      bool   // records small enough that every response is under --fetch-copy-below
	}{
		{"plaintext", []string{"--fetch-copy-below", "0"}, "plaintext", "zero-copy", "copy", false},
		// The default --fetch-copy-below (64 KiB): responses of a few KiB
		// go as one copied write, from the page cache.
		{"plaintext-small", nil, "plaintext", "copy", "zero-copy", true},
		{"fetch-copy", []string{"--fetch-copy"}, "plaintext", "copy", "zero-copy", false},
		{"tls", nil, "tls", "copy", "zero-copy", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, certs := harness.StartTLSBroker(t, t.TempDir(), false, append([]string{"--fsync", "never"}, tc.extra...)...)
			ctx := harness.Context(t, 60*time.Second)
			topic := "counters-" + tc.name
			if _, err := kadm.NewClient(b.Client(t)).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			prod := b.Client(t, kgo.DefaultProduceTopic(topic))
			var recs []*kgo.Record
			for i := 0; i < 500; i++ {
				v := testValue(i)
				if tc.small {
					if i == 20 {
						break
					}
					v = v[:100]
				}
				recs = append(recs, &kgo.Record{Value: v})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			addr := b.Addr
			var opts []kgo.Opt
			if tc.listener == "tls" {
				addr = b.TLSAddr
				opts = append(opts, kgo.DialTLSConfig(certs.ClientConfig(t, false)))
			}
			got := harness.ConsumeAll(ctx, t, addr, topic, len(recs), opts...)
			var consumed float64
			for _, r := range got {
				consumed += float64(len(r.Key) + len(r.Value))
			}
			m := b.Metrics(t)
			if v := fetchBytes(m, tc.listener, tc.sent); v < consumed {
				t.Errorf("fetch bytes %s/%s = %v, want >= %v consumed", tc.listener, tc.sent, v, consumed)
			}
			if v := fetchBytes(m, tc.listener, tc.idle); v != 0 {
				t.Errorf("fetch bytes %s/%s = %v, want 0", tc.listener, tc.idle, v)
			}
			// client_golang writes label pairs sorted by name.
			infoPath := tc.sent // the listener's fetch_path names the zero-copy route "sendfile"
			if infoPath == "zero-copy" || tc.small {
				infoPath = "sendfile"
			}
			info := `ringlog_listener_info{addr="` + addr + `",fetch_path="` + infoPath + `",listener="` + tc.listener + `"}`
			if m[info] != 1 {
				t.Errorf("%s missing from /metrics", info)
			}
			_, hasCPU := m["process_cpu_seconds_total"]
			if m[`ringlog_requests_total{api="Fetch"}`] < 1 || !hasCPU || m["go_goroutines"] <= 0 {
				t.Errorf("request, process or runtime metrics missing")
			}
			h, err := b.Health()
			if err != nil {
				t.Fatal(err)
			}
			stats := h["stats"].(map[string]any)
			zc, cp := stats["zero_copy_bytes"].(float64), stats["copied_bytes"].(float64)
			if tc.sent == "zero-copy" && (zc < consumed || cp != 0) {
				t.Errorf("/healthz zero_copy_bytes=%v copied_bytes=%v, want >= %v and 0", zc, cp, consumed)
			}
			if tc.sent == "copy" && (cp < consumed || zc != 0) {
				t.Errorf("/healthz copied_bytes=%v zero_copy_bytes=%v, want >= %v and 0", cp, zc, consumed)
			}
			paths := h["fetch_path"].(map[string]any)
			wantPlain := "sendfile"
			if tc.name == "fetch-copy" {
				wantPlain = "copy"
			}
			if paths["plaintext"] != wantPlain || paths["tls"] != "copy" {
				t.Errorf("/healthz fetch_path = %v", paths)
			}
		})
	}
}

// fetchConn is one TCP connection for raw Fetch requests: the timing of a
// long poll is measured without a client library's own waiting.
type fetchConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialFetch(t *testing.T, addr string) *fetchConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fetchConn{t: t, c: c}
}

// fetchReq is a v11 (last non-flexible, topic names) consumer fetch of
// partitions of topic from offset.
func fetchReq(topic string, offset int64, maxWaitMs, minBytes, maxBytes, partMaxBytes int32, partitions ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, minBytes, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, partMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// fetch sends req and returns its response and how long the broker took.
func (fc *fetchConn) fetch(req *kmsg.FetchRequest) (*kmsg.FetchResponse, time.Duration) {
	fc.t.Helper()
	fc.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("longpoll")).AppendRequest(nil, req, fc.corr)
	fc.c.SetDeadline(time.Now().Add(time.Duration(req.MaxWaitMillis)*time.Millisecond + 10*time.Second))
	start := time.Now()
	if _, err := fc.c.Write(frame); err != nil {
		fc.t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(fc.c, size[:]); err != nil {
		fc.t.Fatalf("fetch: %v", err)
	}
	took := time.Since(start)
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(fc.c, body); err != nil {
		fc.t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != fc.corr {
		fc.t.Fatalf("correlation id %d, want %d", corr, fc.corr)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Version = req.Version
	if err := resp.ReadFrom(body[4:]); err != nil {
		fc.t.Fatalf("decoding fetch response: %v", err)
	}
	if resp.ErrorCode != 0 {
		fc.t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				fc.t.Fatalf("fetch %s/%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	return resp, took
}

// batchSizes splits whole record batches into their sizes.
func batchSizes(t *testing.T, b []byte) []int {
	t.Helper()
	var sizes []int
	for len(b) > 0 {
		if len(b) < 61 {
			t.Fatalf("%d trailing bytes", len(b))
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < 61 || size > len(b) {
			t.Fatalf("batch claims %d bytes, %d left", size, len(b))
		}
		sizes = append(sizes, size)
		b = b[size:]
	}
	return sizes
}

// TestFetchLongPoll: a fetch with min_bytes=1 on an empty partition waits
// and is answered as soon as a record is produced; with nothing produced
// it is answered after max_wait_ms; max_bytes and partition_max_bytes
// bound the response, except that the first batch comes whole (KIP-74).
func TestFetchLongPoll(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir())
	ctx := harness.Context(t, 60*time.Second)
	cl := b.Client(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "longpoll"); err != nil {
		t.Fatal(err)
	}

	t.Run("woken by produce", func(t *testing.T) {
		fc := dialFetch(t, b.Addr)
		const delay = 300 * time.Millisecond
		prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			// Real time: the fetch must be parked in its long poll when
			// the record comes, and its answer is timed against delay.
			time.Sleep(delay)
			// Another client, as a consumer waits on producers.
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "longpoll", Partition: 0, Value: []byte("wake up")}).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
			}
		}()
		resp, took := fc.fetch(fetchReq("longpoll", 0, 5000, 1, 1<<20, 1<<20, 0))
		<-produced
		recs := resp.Topics[0].Partitions[0].RecordBatches
		if len(recs) == 0 {
			t.Fatalf("fetch answered after %v without the record", took)
		}
		if _, n, err := checkBatches(recs, 0); err != nil || n != 1 {
			t.Fatalf("%d batches: %v", n, err)
		}
		// The record cannot come back before it was produced; it must come
		// long before max_wait_ms (5 s) runs out.
		if took < delay-50*time.Millisecond || took > 2*time.Second {
			t.Fatalf("long poll answered after %v, want about %v (the produce's delay)", took, delay)
		}
		t.Logf("long poll answered after %v", took)
	})

	t.Run("empty waits max_wait", func(t *testing.T) {
		fc := dialFetch(t, b.Addr)
		const maxWait = 1000 * time.Millisecond
		// Partition 1 stays empty.
		resp, took := fc.fetch(fetchReq("longpoll", 0, int32(maxWait.Milliseconds()), 1, 1<<20, 1<<20, 1))
		if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != 0 {
			t.Fatalf("empty partition returned %d record bytes", n)
		}
		if took < maxWait-50*time.Millisecond || took > maxWait+2*time.Second {
			t.Fatalf("empty fetch answered after %v, want about max_wait_ms %v", took, maxWait)
		}
		t.Logf("empty fetch answered after %v", took)
		// min_bytes=0 does not wait at all.
		_, took = fc.fetch(fetchReq("longpoll", 0, int32(maxWait.Milliseconds()), 0, 1<<20, 1<<20, 1))
		if took > maxWait/2 {
			t.Fatalf("min_bytes=0 fetch waited %v", took)
		}
	})

	t.Run("max bytes", func(t *testing.T) {
		const topic = "maxbytes"
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		// Twenty batches of about 10 KB in each partition.
		batch := harness.EncodeBatch(5, bytes.Repeat([]byte("v"), 2000))
		one := len(batch)
		for p := int32(0); p < 2; p++ {
			for i := 0; i < 20; i++ {
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = -1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = p, append([]byte(nil), batch...)
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatal(err)
				}
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatal(kerr.ErrorForCode(code))
				}
			}
		}
		fc := dialFetch(t, b.Addr)
		total := func(resp *kmsg.FetchResponse) (int, [][]int) {
			n, sizes := 0, [][]int{}
			for _, rp := range resp.Topics[0].Partitions {
				n += len(rp.RecordBatches)
				sizes = append(sizes, batchSizes(t, rp.RecordBatches))
			}
			return n, sizes
		}
		cases := []struct {
			name              string
			maxBytes, partMax int32
			wantMax, wantMin  int // bounds on the response's record bytes
		}{
			// partition_max_bytes caps each partition; 2.5 batches fit.
			{"partition_max_bytes", 1 << 20, int32(one*5/2 + 1), 2 * (one*5/2 + 1), 2 * 2 * one},
			// max_bytes caps the response across partitions.
			{"max_bytes", int32(one*7/2 + 1), 1 << 20, one*7/2 + 1, 3 * one},
			// Both below one batch: the first batch of the response still
			// comes whole (else a consumer could never progress), nothing
			// more.
			{"first batch whole", 100, 100, one, one},
		}
		for _, c := range cases {
			resp, _ := fc.fetch(fetchReq(topic, 0, 0, 1, c.maxBytes, c.partMax, 0, 1))
			n, sizes := total(resp)
			if n > c.wantMax || n < c.wantMin {
				t.Errorf("%s (max_bytes %d, partition_max_bytes %d): %d record bytes %v, want %d..%d",
					c.name, c.maxBytes, c.partMax, n, sizes, c.wantMin, c.wantMax)
			}
			for pi, rp := range resp.Topics[0].Partitions {
				if len(rp.RecordBatches) > int(c.partMax) && len(sizes[pi]) > 1 {
					t.Errorf("%s: partition %d returned %d bytes in %d batches over partition_max_bytes %d",
						c.name, rp.Partition, len(rp.RecordBatches), len(sizes[pi]), c.partMax)
				}
			}
		}
	})
}
