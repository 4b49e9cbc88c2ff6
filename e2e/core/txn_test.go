package core

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// produceTxn runs one transaction of n records "<prefix>-<i>" spread over
// partitions, ending it with commit or abort.
func produceTxn(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int, partitions int32, commit bool) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("%s: begin: %v", prefix, err)
	}
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("%s: produce: %v", prefix, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("%s: end (commit %v): %v", prefix, commit, err)
	}
}

// readTopic reads topic from the start until every partition reaches its
// end offset of the isolation level (read_committed: the last stable
// offset) and returns the values read. Control records are kept by the
// client, so the last offset below the end is always delivered (it is a
// marker or a record that is not aborted), and dropped here.
func readTopic(ctx context.Context, t *testing.T, seeds []string, topic string, committed bool) []string {
	t.Helper()
	adm := kadm.NewClient(harness.NewClient(t, seeds))
	list := adm.ListEndOffsets
	iso := kgo.ReadUncommitted()
	if committed {
		list, iso = adm.ListCommittedOffsets, kgo.ReadCommitted()
	}
	ends, err := list(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("listing end offsets of %s: %v %v", topic, err, ends.Error())
	}
	want := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	cl := harness.NewClient(t, seeds, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	var vals []string
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s (committed %v): %v; %d values so far, partitions left %v", topic, committed, ctx.Err(), len(vals), want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				vals = append(vals, string(r.Value))
			}
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return vals
}

// setBatchCRC recomputes a record batch's CRC-32C after a header edit.
func setBatchCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func countPrefix(vals []string, prefix string) int {
	n := 0
	for _, v := range vals {
		if strings.HasPrefix(v, prefix+"-") {
			n++
		}
	}
	return n
}

// checkTxnVisibility commits, aborts and commits again, and checks what
// read_committed and read_uncommitted consumers see.
func checkTxnVisibility(t *testing.T, seeds []string, topic string, partitions int32) {
	ctx := harness.Context(t, 2*time.Minute)
	cl := harness.TxnClient(t, seeds, "vis-"+topic)
	const n = 40
	produceTxn(ctx, t, cl, topic, "c1", n, partitions, true)
	produceTxn(ctx, t, cl, topic, "ab", n, partitions, false)
	produceTxn(ctx, t, cl, topic, "c2", n, partitions, true)
	harness.WaitStable(ctx, t, seeds, topic)

	committed := readTopic(ctx, t, seeds, topic, true)
	if got := countPrefix(committed, "c1") + countPrefix(committed, "c2"); got != 2*n || len(committed) != 2*n {
		t.Fatalf("read_committed saw %d values, %d of them committed, want %d committed and nothing else: %v", len(committed), got, 2*n, committed)
	}
	all := readTopic(ctx, t, seeds, topic, false)
	if countPrefix(all, "c1") != n || countPrefix(all, "ab") != n || countPrefix(all, "c2") != n || len(all) != 3*n {
		t.Fatalf("read_uncommitted saw %d values, want the %d of all three transactions", len(all), 3*n)
	}
}

// TestTxnCommitAbortVisibility: a committed transaction's records are
// visible to read_committed consumers, an aborted one's only to
// read_uncommitted ones. On one broker (markers appended locally) and on
// three (markers sent to other leaders with WriteTxnMarkers).
func TestTxnCommitAbortVisibility(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers")
	}
	t.Run("single", func(t *testing.T) {
		b := harness.StartBroker(t, t.TempDir(), harness.TxnBrokerArgs...)
		harness.CreateTopic(t, kadm.NewClient(b.Client(t)), "txn-vis", 3, 1)
		checkTxnVisibility(t, []string{b.Addr}, "txn-vis", 3)
	})
	t.Run("rf3", func(t *testing.T) {
		c := harness.StartReplCluster(t, 3, harness.TxnBrokerArgs...)
		harness.CreateTopic(t, kadm.NewClient(harness.NewClient(t, c.Addrs())), "txn-vis3", 6, 3)
		checkTxnVisibility(t, c.Addrs(), "txn-vis3", 6)
	})
}

// TestTxnProducerFencing: a second producer with the same transactional
// id fences the first: its open transaction is aborted and its next
// EndTxn fails with a fencing error; old-version requests get
// INVALID_PRODUCER_EPOCH.
func TestTxnProducerFencing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers")
	}
	b := harness.StartBroker(t, t.TempDir(), harness.TxnBrokerArgs...)
	seeds := []string{b.Addr}
	const topic = "txn-fence"
	harness.CreateTopic(t, kadm.NewClient(b.Client(t)), topic, 2, 1)
	ctx := harness.Context(t, 2*time.Minute)

	first := harness.TxnClient(t, seeds, "fence-me")
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("zombie-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := harness.TxnClient(t, seeds, "fence-me")
	produceTxn(ctx, t, second, topic, "winner", 10, 2, true)

	err := first.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("EndTxn of the fenced producer: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	harness.WaitStable(ctx, t, seeds, topic)
	vals := readTopic(ctx, t, seeds, topic, true)
	if len(vals) != 10 || countPrefix(vals, "winner") != 10 {
		t.Fatalf("read_committed saw %v, want the 10 records of the second producer only", vals)
	}

	// Raw requests: the coordinator's answers by version (KIP-588).
	raw := b.Client(t)
	coordinatorReq := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		var resp kmsg.Response
		harness.EventuallyEvery(t, 100*time.Millisecond, harness.TimeLeft(ctx), "an answer other than a retriable coordinator error", func() (bool, string) {
			var err error
			resp, err = raw.Request(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			r, ok := resp.(*kmsg.InitProducerIDResponse)
			if !ok {
				return true, ""
			}
			switch r.ErrorCode {
			case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
				return false, kerr.ErrorForCode(r.ErrorCode).Error()
			}
			return true, ""
		})
		return resp
	}
	ipReq := kmsg.NewPtrInitProducerIDRequest()
	id := "fence-raw"
	ipReq.TransactionalID, ipReq.TransactionTimeoutMillis = &id, 10000
	r1 := coordinatorReq(ipReq).(*kmsg.InitProducerIDResponse)
	r2 := coordinatorReq(ipReq).(*kmsg.InitProducerIDResponse)
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r2.ProducerID != r1.ProducerID || r2.ProducerEpoch != r1.ProducerEpoch+1 {
		t.Fatalf("InitProducerId twice: %+v then %+v, want the same id with the epoch bumped", r1, r2)
	}
	// A client pinned to Kafka 2.6 sends EndTxn v1, from before
	// PRODUCER_FENCED existed.
	old := b.Client(t, kgo.MaxVersions(kversion.V2_6_0()))
	for _, c := range []struct {
		cl   *kgo.Client
		want int16
	}{{old, kerr.InvalidProducerEpoch.Code}, {raw, kerr.ProducerFenced.Code}} {
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, r1.ProducerID, r1.ProducerEpoch, true
		resp, err := end.RequestWith(ctx, c.cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != c.want {
			t.Fatalf("EndTxn v%d with the old epoch: %v, want %v", resp.Version, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(c.want))
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, r2.ProducerID, r2.ProducerEpoch, true
	if resp, err := end.RequestWith(ctx, raw); err != nil || resp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn with nothing open: %v %v, want INVALID_TXN_STATE", err, resp)
	}

	// A client may not send transactional batches without a transactional
	// id, nor WriteTxnMarkers.
	batch := encodeIdempotentBatch(r2.ProducerID, r2.ProducerEpoch, 0, 1, []byte("x"))
	batch[22] |= 0x10 // transactional attribute (low byte of the attributes)
	setBatchCRC(batch)
	if code, _ := produceRawOffset(t, raw, topic, batch); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without a transactional id: %v", kerr.ErrorForCode(code))
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = r2.ProducerID, r2.ProducerEpoch, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	wm.Markers = append(wm.Markers, m)
	if resp, err := wm.RequestWith(ctx, raw); err != nil || resp.Markers[0].Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WriteTxnMarkers from a client: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, resp)
	}
}

// TestTxnCoordinatorFailover kills the transaction coordinator (kill -9)
// between a transaction's produce and its commit on a 3-broker RF=3
// cluster. The new leader of the id's __transaction_state partition loads
// the transaction and the producer finishes it there; transactions keep
// working afterwards. Whatever the outcome of the interrupted one, every
// transaction is all or nothing for a read_committed consumer, and every
// acknowledged commit is visible.
func TestTxnCoordinatorFailover(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9
	if testing.Short() {
		t.Skip("starts brokers")
	}
	c := harness.StartReplCluster(t, 3, harness.TxnBrokerArgs...)
	seeds := c.Addrs()
	adm := kadm.NewClient(harness.NewClient(t, seeds))
	const topic, txnID, per = "txn-fo", "failover", 9
	harness.CreateTopic(t, adm, topic, 3, 3)
	ctx := harness.Context(t, 4*time.Minute)

	// Generous retries: the interrupted EndTxn should reach the new
	// coordinator rather than give up while leadership moves.
	producer := func() *kgo.Client {
		return harness.TxnClient(t, seeds, txnID, kgo.RequestRetries(1000), kgo.RetryTimeout(time.Minute))
	}
	cl := producer()
	acked := map[int]bool{}
	oneTxn := func(i int, beforeEnd func()) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		var rs []*kgo.Record
		for j := range per {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(j % 3), Value: fmt.Appendf(nil, "t%d-%d", i, j)})
		}
		err := cl.ProduceSync(ctx, rs...).FirstErr()
		if beforeEnd != nil {
			beforeEnd()
		}
		if err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	// coordinator waits until txnID has a coordinator and returns it.
	coordinator := func() int32 {
		var id int32
		harness.EventuallyEvery(t, 100*time.Millisecond, harness.TimeLeft(ctx), "finding the coordinator", func() (bool, string) {
			r, ok := adm.FindTxnCoordinators(ctx, txnID)[txnID]
			id = r.NodeID
			return ok && r.Err == nil, fmt.Sprint(r.Err)
		})
		return id
	}
	killCoordinator := func() {
		id := coordinator()
		t.Logf("killing node %d, the coordinator of %q", id, txnID)
		c.Node(id).Kill9()
	}
	const kill, maxTxns = 3, 40
	committedAfter := false
	for i := 0; i < maxTxns && !committedAfter; i++ {
		var hook func()
		if i == kill {
			hook = killCoordinator
		}
		start := time.Now()
		err := oneTxn(i, hook)
		if hook != nil {
			t.Logf("the interrupted transaction ended %v after the kill: %v", time.Since(start).Round(10*time.Millisecond), err)
		}
		if err == nil {
			acked[i] = true
			committedAfter = i > kill
			continue
		}
		// Outcome unknown. A new producer's InitProducerId fences the
		// old one and aborts whatever it left open.
		t.Logf("transaction %d: %v (outcome unknown); starting a new producer", i, err)
		cl.Close()
		cl = producer()
		// The next transaction starts once the id has a coordinator again.
		coordinator()
	}
	if !committedAfter {
		t.Fatalf("no transaction committed after the coordinator was killed (%d tried)", maxTxns)
	}
	harness.WaitStable(ctx, t, seeds, topic)
	counts := map[int]int{}
	for _, v := range readTopic(ctx, t, seeds, topic, true) {
		var i, j int
		if _, err := fmt.Sscanf(v, "t%d-%d", &i, &j); err != nil {
			t.Fatalf("unexpected value %q", v)
		}
		counts[i]++
	}
	for i, n := range counts {
		if n != per {
			t.Errorf("transaction %d: %d of its %d records visible", i, n, per)
		}
	}
	for i := range acked {
		if counts[i] != per {
			t.Errorf("acknowledged transaction %d: %d of its %d records visible", i, counts[i], per)
		}
	}
	t.Logf("%d transactions acknowledged, %d visible", len(acked), len(counts))
}

// txnHelperEnv makes the test binary a GroupTransactSession copier (see
// TestTxnHelperProcess) instead of running tests.
const txnHelperEnv = "RINGLOG_TXN_HELPER"

// TestTxnHelperProcess is not a test: with txnHelperEnv set it is the
// read-process-write process TestTxnGroupTransactSession starts and kills.
// It copies every record of the input topic to the output topic, value
// "<partition>/<offset>", one transaction per poll, until SIGTERM.
func TestTxnHelperProcess(t *testing.T) {
	t.Parallel()
	spec := os.Getenv(txnHelperEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	parts := strings.Split(spec, ";") // seeds;group;in;out
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(parts[0], ",")...),
		kgo.TransactionalID("copier"), kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(parts[1]), kgo.ConsumeTopics(parts[2]),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(20*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, 25)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(topic string, p int32, err error) { fmt.Printf("fetch %s-%d: %v\n", topic, p, err) })
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out := &kgo.Record{Topic: parts[3], Partition: r.Partition, Value: fmt.Appendf(nil, "%d/%d", r.Partition, r.Offset)}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Printf("produce: %v\n", err)
				}
			})
		})
		// Produced but not committed for a while of real time: most of
		// the parent's kills land inside a transaction, which the next
		// incarnation's InitProducerId then aborts.
		if err := sess.Client().Flush(ctx); err == nil {
			time.Sleep(50 * time.Millisecond)
		}
		// End(context.Background()): a SIGTERM should not cut a commit
		// in half; the transaction ends either way.
		committed, err := sess.End(context.Background(), kgo.TryCommit)
		fmt.Printf("txn of %d records: committed %v err %v\n", fs.NumRecords(), committed, err)
	}
}

type txnHelper struct {
	cmd    *exec.Cmd
	out    *harness.SyncBuffer
	exited chan struct{}
	err    error
}

func startTxnHelper(t *testing.T, spec string) *txnHelper {
	t.Helper()
	h := &txnHelper{out: &harness.SyncBuffer{}, exited: make(chan struct{})}
	h.cmd = exec.Command(os.Args[0], "-test.run=^TestTxnHelperProcess$", "-test.v", "-test.count=1", "-test.timeout=10m")
	h.cmd.Env = append(os.Environ(), txnHelperEnv+"="+spec, "RINGLOG_TEST_BIN="+harness.RinglogBin)
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.out
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		<-h.exited
	})
	return h
}

// TestTxnGroupTransactSession copies an input topic to an output topic
// with a GroupTransactSession on a 3-broker RF=3 cluster, killing the
// copier process with SIGKILL twice mid-stream and restarting it. Every
// input record must appear in the output exactly once for a
// read_committed consumer, and the group's committed offsets must be the
// input's end offsets.
func TestTxnGroupTransactSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers")
	}
	if os.Getenv(txnHelperEnv) != "" {
		t.Skip("in the helper process")
	}
	c := harness.StartReplCluster(t, 3, harness.TxnBrokerArgs...)
	seeds := c.Addrs()
	adm := kadm.NewClient(harness.NewClient(t, seeds))
	const in, out, grp, partitions, n = "eos-in", "eos-out", "eos-copier", 3, 1500
	harness.CreateTopic(t, adm, in, partitions, 3)
	harness.CreateTopic(t, adm, out, partitions, 3)
	ctx := harness.Context(t, 6*time.Minute)

	prod := harness.NewClient(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: in, Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil || ends.Error() != nil {
		t.Fatal(err, ends.Error())
	}

	// progress is how many input records the group has committed.
	progress := func() int64 {
		offs, err := adm.FetchOffsets(ctx, grp)
		if err != nil {
			return 0
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == in && o.Err == nil && o.At > 0 {
				sum += o.At
			}
		})
		return sum
	}
	waitProgress := func(h *txnHelper, atLeast int64) {
		t.Helper()
		for progress() < atLeast {
			select {
			case <-h.exited:
				t.Fatalf("copier exited: %v\n%s", h.err, h.out.String())
			case <-ctx.Done():
				t.Fatalf("copier progress %d, waiting for %d\n%s", progress(), atLeast, h.out.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	spec := strings.Join([]string{strings.Join(seeds, ","), grp, in, out}, ";")
	h := startTxnHelper(t, spec)
	for _, at := range []int64{n / 5, n / 2} {
		waitProgress(h, at)
		h.cmd.Process.Signal(syscall.SIGKILL)
		<-h.exited
		t.Logf("killed the copier at progress %d (>= %d)", progress(), at)
		h = startTxnHelper(t, spec)
	}
	waitProgress(h, n)
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(time.Minute):
		t.Fatalf("copier ignored SIGTERM\n%s", h.out.String())
	}

	offs, err := adm.FetchOffsets(ctx, grp)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup(in, e.Partition)
		if !ok || o.Err != nil || o.At != e.Offset {
			t.Errorf("%s-%d: committed %+v, end offset %d", in, e.Partition, o, e.Offset)
		}
	})
	// A transaction the last kill left open is aborted by its timeout.
	harness.WaitStable(ctx, t, seeds, out)
	seen := map[string]int{}
	for _, v := range readTopic(ctx, t, seeds, out, true) {
		seen[v]++
	}
	missing, dup := 0, 0
	ends.Each(func(e kadm.ListedOffset) {
		for off := int64(0); off < e.Offset; off++ {
			switch k := fmt.Sprintf("%d/%d", e.Partition, off); seen[k] {
			case 1:
			case 0:
				missing++
			default:
				dup++
				t.Errorf("input %s copied %d times", k, seen[k])
			}
			delete(seen, fmt.Sprintf("%d/%d", e.Partition, off))
		}
	})
	if missing > 0 || dup > 0 || len(seen) > 0 {
		t.Fatalf("%d input records missing from the output, %d duplicated, %d unexpected output values", missing, dup, len(seen))
	}
	all := readTopic(ctx, t, seeds, out, false)
	t.Logf("%d input records copied exactly once; read_uncommitted sees %d output records (aborted copies included)", n, len(all))
}

// TestTxnConfluentKafka: librdkafka's transactional producer (python
// confluent_kafka) commits and aborts; read_committed sees the commit only.
func TestTxnConfluentKafka(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers")
	}
	harness.NeedConfluentKafka(t)
	b := harness.StartBroker(t, t.TempDir(), harness.TxnBrokerArgs...)
	const topic = "py-txn"
	harness.CreateTopic(t, kadm.NewClient(b.Client(t)), topic, 3, 1)
	out := harness.RunCmd(t, "", 3*time.Minute, "/usr/bin/python3", "testdata/confluent_txn.py", b.Addr, topic, "300")
	if !strings.Contains(out, "OK committed 300 aborted 300") {
		t.Fatalf("python output: %s", out)
	}
	ctx := harness.Context(t, time.Minute)
	harness.WaitStable(ctx, t, []string{b.Addr}, topic)
	committed := readTopic(ctx, t, []string{b.Addr}, topic, true)
	if len(committed) != 300 || countPrefix(committed, "commit") != 300 {
		t.Fatalf("franz-go read_committed saw %d values (%d committed), want the 300 committed", len(committed), countPrefix(committed, "commit"))
	}
}
