package netfaults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
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

// sumPrefix adds the counters whose name starts with prefix.
func sumPrefix(m map[string]int64, prefix string) int64 {
	var n int64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// netAck is one acknowledged produce of the history.
type netAck struct {
	producer, seq int
	partition     int32
	offset        int64
	at            time.Time
	lat           time.Duration
}

// netTxn is one transaction of the history and how it ended as far as its
// producer knows: committed, aborted, or unknown (an error on the way).
type netTxn struct {
	id      int
	values  []string
	outcome string
}

// netHistory records every produce attempt of the workload.
type netHistory struct {
	mu       sync.Mutex
	acks     map[string]netAck
	errs     map[string]int
	attempts atomic.Int64
	txns     []netTxn
	txErrs   []string // each failed transaction's error, with its time
	stopped  atomic.Bool
	wg       sync.WaitGroup
}

func newNetHistory() *netHistory {
	return &netHistory{acks: map[string]netAck{}, errs: map[string]int{}}
}

func (h *netHistory) fail(err error) {
	name := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		name = ke.Message
	} else if errors.Is(err, context.DeadlineExceeded) {
		name = "client timeout"
	}
	h.mu.Lock()
	h.errs[name]++
	h.mu.Unlock()
}

// netClientOpts are the clients' settings: acks=all, franz-go's own
// request timeouts (10 s for the broker, plus 10 s), so that how long a
// produce waits is up to the broker, and a metadata age short enough for
// faults of seconds (franz-go refreshes at most every 5 s by default).
func netClientOpts(seeds []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(10 * time.Second), kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.DialTimeout(2 * time.Second), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}
}

// runIdempotent starts one idempotent producer per partition of topic,
// each sending one keyed record at a time (key = producer), retrying
// inside kgo until a record's delivery timeout.
func (h *netHistory) runIdempotent(t *testing.T, seeds []string, topic string, partitions int) {
	for p := range partitions {
		cl, err := kgo.NewClient(append(netClientOpts(seeds), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(60*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer cl.Close()
			key := []byte(fmt.Sprintf("k%02d", p))
			for seq := 0; !h.stopped.Load() && seq < 1_000_000; seq++ {
				v := harness.FailoverValue(p, seq)
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				start := time.Now()
				h.attempts.Add(1)
				r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Key: key, Value: []byte(v)}).First()
				cancel()
				if err != nil {
					h.fail(err)
					// Backs off from a broker that fails at once
					// instead of spinning on it.
					time.Sleep(20 * time.Millisecond)
					continue
				}
				now := time.Now()
				h.mu.Lock()
				h.acks[v] = netAck{producer: p, seq: seq, partition: r.Partition, offset: r.Offset, at: now, lat: now.Sub(start)}
				h.mu.Unlock()
			}
		}()
	}
}

// runTransactional runs one transactional producer on topic: transactions
// of 2 records per partition, every third aborted on purpose.
func (h *netHistory) runTransactional(t *testing.T, seeds []string, topic string, partitions int) {
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(append(netClientOpts(seeds), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionalID("netfaults-tx"), kgo.TransactionTimeout(10*time.Second),
			kgo.RecordDeliveryTimeout(20*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newClient()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer func() { cl.Close() }()
		pace := time.NewTicker(30 * time.Millisecond) // a transaction each 30 ms at most
		defer pace.Stop()
		for id := 0; !h.stopped.Load() && id < 100_000; id++ {
			tx := netTxn{id: id, outcome: "unknown"}
			commit := id%3 != 2
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.BeginTransaction()
			for p := 0; err == nil && p < partitions; p++ {
				// Stops at the first failed record: a later success must
				// not hide it (it did: a transaction whose first record
				// failed was committed and counted as losing it).
				for k := 0; err == nil && k < 2; k++ {
					v := fmt.Sprintf("t%06d-%d-%d", id, p, k)
					tx.values = append(tx.values, v)
					err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}).FirstErr()
				}
			}
			if err == nil {
				err = cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
				if err == nil {
					tx.outcome = map[bool]string{true: "committed", false: "aborted"}[commit]
				}
			}
			if err != nil {
				h.fail(fmt.Errorf("transaction: %w", err))
				h.mu.Lock()
				h.txErrs = append(h.txErrs, fmt.Sprintf("transaction %d at %s: %v", id, time.Now().Format("15:04:05.000"), err))
				h.mu.Unlock()
				// Abort what is left; a producer that cannot is
				// replaced, and the new one's InitProducerID fences
				// and aborts the old one's transaction.
				// A fenced producer (its transaction outlived the
				// transaction timeout during a fault, so the coordinator
				// aborted it and bumped the epoch) stays fenced: only a
				// new one goes on.
				fenced := errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
				if aerr := cl.AbortBufferedRecords(ctx); fenced || aerr != nil || cl.EndTransaction(ctx, kgo.TryAbort) != nil {
					cl.Close()
					cl = newClient()
				}
			}
			cancel()
			h.mu.Lock()
			h.txns = append(h.txns, tx)
			h.mu.Unlock()
			<-pace.C
		}
	}()
}

// waitAcked waits until every partition 0..partitions-1 has an
// acknowledgement given after since: the load runs (or runs again).
func (h *netHistory) waitAcked(t *testing.T, partitions int, since time.Time, limit time.Duration) {
	t.Helper()
	harness.EventuallyEvery(t, 20*time.Millisecond, limit, "acknowledgements after "+since.Format("15:04:05.000")+" on every partition", func() (bool, string) {
		seen := map[int32]bool{}
		h.mu.Lock()
		for _, a := range h.acks {
			if a.at.After(since) {
				seen[a.partition] = true
			}
		}
		h.mu.Unlock()
		return len(seen) == partitions, fmt.Sprintf("on %d of %d partitions", len(seen), partitions)
	})
}

// window is how produce fared during one fault: the longest time with no
// acknowledgement on some partition (a gap overlapping the fault), and
// the slowest acknowledgement given during it.
type window struct {
	unavailable time.Duration
	gapPart     int32
	maxAck      time.Duration
	maxAckAt    time.Time
}

func (h *netHistory) window(from, to time.Time) window {
	h.mu.Lock()
	byPart := map[int32][]time.Time{}
	var w window
	for _, a := range h.acks {
		byPart[a.partition] = append(byPart[a.partition], a.at)
		if !a.at.Before(from) && !a.at.After(to) && a.lat > w.maxAck {
			w.maxAck, w.maxAckAt = a.lat, a.at
		}
	}
	h.mu.Unlock()
	for p, ts := range byPart {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		prev := from
		for _, at := range ts {
			if at.Before(from) {
				prev = at
				continue
			}
			if gap := at.Sub(prev); gap > w.unavailable {
				w.unavailable, w.gapPart = gap, p
			}
			prev = at
			if at.After(to) {
				break
			}
		}
	}
	return w
}

// netCheck is what the checker found.
type netCheck struct {
	acked, inLog, lost, moved, duplicated, reordered, offsetConflicts int
	txCommitted, txAborted, txUnknown                                 int
	txLost, txAbortedVisible, txPartial, txDuplicated                 int
	problems                                                          []string
}

func (c *netCheck) note(f string, a ...any) {
	if len(c.problems) < 30 {
		c.problems = append(c.problems, fmt.Sprintf(f, a...))
	}
}

func (c *netCheck) bad() bool {
	return c.lost+c.moved+c.duplicated+c.reordered+c.offsetConflicts+c.txLost+c.txAbortedVisible+c.txPartial+c.txDuplicated > 0
}

// around prints the log of partition p near offset off.
func around(rs []*kgo.Record, off int64) string {
	var b strings.Builder
	for _, r := range rs {
		if r.Offset >= off-3 && r.Offset <= off+3 {
			fmt.Fprintf(&b, " %d:%s", r.Offset, r.Value)
		}
	}
	return b.String()
}

// checkNetHistory compares the history with the logs read back: logs of
// the idempotent topic (read_uncommitted, every record) and the values of
// the transactional topic a read_committed consumer saw.
func checkNetHistory(acks map[string]netAck, logs map[int32][]*kgo.Record, txns []netTxn, committedSeen map[string]int) netCheck {
	var c netCheck
	c.acked = len(acks)
	where := map[string][]*kgo.Record{}
	for p, rs := range logs {
		lastSeq := map[int]int{}
		for _, r := range rs {
			c.inLog++
			v := string(r.Value)
			where[v] = append(where[v], r)
			prod, seq, ok := parseFailoverValue(v)
			if !ok {
				c.note("partition %d offset %d: unexpected value %q", p, r.Offset, v)
				continue
			}
			if last, ok := lastSeq[prod]; ok && seq <= last {
				c.reordered++
				c.note("partition %d offset %d: key k%02d seq %d after seq %d; log:%s", p, r.Offset, prod, seq, last, around(rs, r.Offset))
			}
			lastSeq[prod] = max(lastSeq[prod], seq)
		}
	}
	for v, rs := range where {
		if len(rs) > 1 {
			c.duplicated++
			c.note("%s written %d times (idempotence), first at %d-%d", v, len(rs), rs[0].Partition, rs[0].Offset)
		}
	}
	byOffset := map[string]string{}
	for v, a := range acks {
		k := fmt.Sprintf("%d-%d", a.partition, a.offset)
		if other, dup := byOffset[k]; dup {
			c.offsetConflicts++
			c.note("offset %s acknowledged to both %s and %s", k, other, v)
		}
		byOffset[k] = v
		rs := where[v]
		switch {
		case len(rs) == 0:
			c.lost++
			c.note("acknowledged %s (partition %d offset %d, at %s) lost; log there:%s", v, a.partition, a.offset, a.at.Format("15:04:05.000"), around(logs[a.partition], a.offset))
		case rs[0].Partition != a.partition || rs[0].Offset != a.offset:
			c.moved++
			c.note("acknowledged %s at %d-%d, found at %d-%d", v, a.partition, a.offset, rs[0].Partition, rs[0].Offset)
		}
	}
	for _, tx := range txns {
		seen := 0
		for _, v := range tx.values {
			if n := committedSeen[v]; n > 0 {
				seen++
				if n > 1 {
					c.txDuplicated++
					c.note("transaction %d: %s read %d times", tx.id, v, n)
				}
			}
		}
		switch tx.outcome {
		case "committed":
			c.txCommitted++
			if seen != len(tx.values) {
				c.txLost++
				c.note("committed transaction %d: %d of %d records visible to read_committed", tx.id, seen, len(tx.values))
			}
		case "aborted":
			c.txAborted++
			if seen != 0 {
				c.txAbortedVisible++
				c.note("aborted transaction %d: %d records visible to read_committed", tx.id, seen)
			}
		default:
			c.txUnknown++
			// Its outcome is unknown to its producer, but it is atomic.
			if seen != 0 && seen != len(tx.values) {
				c.txPartial++
				c.note("transaction %d (outcome unknown to its producer): %d of %d records visible", tx.id, seen, len(tx.values))
			}
		}
	}
	return c
}

// TestCheckNetHistoryDetects: the checker finds each kind of anomaly.
func TestCheckNetHistoryDetects(t *testing.T) {
	rec := func(p int32, off int64, v string) *kgo.Record {
		return &kgo.Record{Partition: p, Offset: off, Value: []byte(v)}
	}
	v := harness.FailoverValue
	acks := map[string]netAck{
		v(0, 0): {producer: 0, seq: 0, partition: 0, offset: 0},
		v(0, 1): {producer: 0, seq: 1, partition: 0, offset: 1},
		v(0, 2): {producer: 0, seq: 2, partition: 0, offset: 2}, // lost
		v(0, 3): {producer: 0, seq: 3, partition: 0, offset: 1}, // offset given twice, and found elsewhere
		v(1, 0): {producer: 1, seq: 0, partition: 1, offset: 5}, // moved
	}
	logs := map[int32][]*kgo.Record{
		0: {rec(0, 0, v(0, 0)), rec(0, 1, v(0, 1)), rec(0, 2, v(0, 3)), rec(0, 3, v(0, 1))}, // v(0,1) twice, seq 1 after 3
		1: {rec(1, 0, v(1, 0))},
	}
	txns := []netTxn{
		{id: 0, values: []string{"a", "b"}, outcome: "committed"},
		{id: 1, values: []string{"c", "d"}, outcome: "aborted"},
		{id: 2, values: []string{"e", "f"}, outcome: "unknown"},
		{id: 3, values: []string{"g", "h"}, outcome: "committed"},
	}
	seen := map[string]int{"a": 1, "c": 1, "e": 1, "g": 1, "h": 2}
	c := checkNetHistory(acks, logs, txns, seen)
	want := netCheck{acked: 5, inLog: 5, lost: 1, moved: 2, duplicated: 1, reordered: 1, offsetConflicts: 1,
		txCommitted: 2, txAborted: 1, txUnknown: 1, txLost: 1, txAbortedVisible: 1, txPartial: 1, txDuplicated: 1}
	c.problems = nil
	if c.acked != want.acked || c.inLog != want.inLog || c.lost != want.lost || c.moved != want.moved ||
		c.duplicated != want.duplicated || c.reordered != want.reordered || c.offsetConflicts != want.offsetConflicts ||
		c.txCommitted != want.txCommitted || c.txAborted != want.txAborted || c.txUnknown != want.txUnknown ||
		c.txLost != want.txLost || c.txAbortedVisible != want.txAbortedVisible || c.txPartial != want.txPartial || c.txDuplicated != want.txDuplicated {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	clean := checkNetHistory(map[string]netAck{v(0, 0): {partition: 0, offset: 0}},
		map[int32][]*kgo.Record{0: {rec(0, 0, v(0, 0)), rec(0, 1, v(0, 1))}},
		[]netTxn{{values: []string{"a"}, outcome: "committed"}, {values: []string{"b"}, outcome: "aborted"}, {values: []string{"c"}, outcome: "unknown"}},
		map[string]int{"a": 1})
	if clean.bad() {
		t.Fatalf("clean history flagged: %v", clean.problems)
	}
}

// readCommitted reads topic from the start to its end offsets with
// read_committed and counts each value seen.
func readCommitted(t *testing.T, c *harness.Cluster, topic string, partitions int32) map[string]int {
	t.Helper()
	seen, _ := readTx(t, c, topic, partitions, kgo.ReadCommitted())
	return seen
}

// explainTxLoss says, for each record of a committed transaction that
// read_committed did not return, where a read_uncommitted read finds it
// (partition, offset, producer id and epoch) and what lies around it, or
// that it is in no log: the difference between a lost write and a record
// hidden by a wrong abort or last stable offset.
func explainTxLoss(t *testing.T, c *harness.Cluster, topic string, partitions int32, txns []netTxn, seen map[string]int) {
	t.Helper()
	_, raw := readTx(t, c, topic, partitions, kgo.ReadUncommitted())
	at := map[string]*kgo.Record{}
	byPart := map[int32][]*kgo.Record{}
	for _, r := range raw {
		at[string(r.Value)] = r
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	desc := func(r *kgo.Record) string {
		return fmt.Sprintf("%d-%d %s pid %d epoch %d", r.Partition, r.Offset, r.Value, r.ProducerID, r.ProducerEpoch)
	}
	for _, tx := range txns {
		if tx.outcome != "committed" {
			continue
		}
		for _, v := range tx.values {
			if seen[v] > 0 {
				continue
			}
			r, ok := at[v]
			if !ok {
				t.Logf("committed transaction %d: %s is in no log (read_uncommitted)", tx.id, v)
				continue
			}
			var near []string
			for _, o := range byPart[r.Partition] {
				if o.Offset >= r.Offset-4 && o.Offset <= r.Offset+4 {
					near = append(near, desc(o))
				}
			}
			t.Logf("committed transaction %d: %s hidden from read_committed, in the log at %s; around it: %s",
				tx.id, v, desc(r), strings.Join(near, "; "))
		}
	}
}

// readTx reads topic from the start to its end offsets at the given
// isolation level, counting each value seen and keeping the records.
func readTx(t *testing.T, c *harness.Cluster, topic string, partitions int32, iso kgo.IsolationLevel) (map[string]int, []*kgo.Record) {
	t.Helper()
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	ends := harness.ListedEnds(t, adm, topic)
	cons := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	seen := map[string]int{}
	var all []*kgo.Record
	next := map[int32]int64{}
	ctx := harness.Context(t, 60*time.Second)
	done := func() bool {
		for p := range partitions {
			// The end includes control records; the last one read may
			// lie below it, so read until a poll brings nothing more
			// and the position passed the last data offset.
			e, _ := ends.Lookup(topic, p)
			if next[p] < e.Offset-1 {
				return false
			}
		}
		return true
	}
	quiet := 0
	for !done() || quiet < 2 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: stuck at %v of %v", topic, next, ends)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			all = append(all, r)
			next[r.Partition] = r.Offset + 1
			n++
		})
		if n == 0 {
			quiet++
			if quiet >= 5 {
				break // only control records and aborted data left
			}
		} else {
			quiet = 0
		}
	}
	return seen, all
}

// TestNetworkFaults runs the fixed schedule of network faults against
// three brokers (RF=3, min.insync.replicas 2) under an idempotent acks=all
// load and a transactional producer, then checks the history. Every fault
// is injected, probed, held, healed, and followed by a wait for whole
// ISRs; the summary lines give, per fault, the longest time some
// partition had no acknowledgement and how long the ISRs took to be whole
// again. RINGLOG_NETFAULTS_CUT sets the leader cut's length (default
// 20s). docs/NETWORK-FAULTS.md.
func TestNetworkFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	// A randomized schedule's steps take up to a minute each.
	limit := 8 * time.Minute
	if os.Getenv("RINGLOG_NETFAULTS_SEED") != "" {
		n, _ := strconv.Atoi(os.Getenv("RINGLOG_NETFAULTS_STEPS"))
		limit = time.Duration(3+max(n, 12)) * time.Minute
	}
	if !harness.InNetnsChildFor(t, limit) {
		return
	}
	leaderCut := 20 * time.Second
	if v := os.Getenv("RINGLOG_NETFAULTS_CUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("RINGLOG_NETFAULTS_CUT: %v", err)
		}
		leaderCut = d
	}
	tn := harness.NewNet(t, 3)
	nft := tn.NftOrSkip()
	c := harness.StartReplClusterAt(t, tn.Specs(), "--replica-lag-time-max", harness.PartitionLag.String())
	// Cleanups run last-in first: faults off before the brokers stop.
	t.Cleanup(func() { tn.SetRules(nft) })
	t.Cleanup(tn.HealAll)
	harness.LogTailsOnFailure(t, c)
	// RINGLOG_NETFAULTS_LOGS: a directory to keep every broker's whole log
	// in (node-N.log), pass or fail.
	if dir := os.Getenv("RINGLOG_NETFAULTS_LOGS"); dir != "" {
		t.Cleanup(func() {
			for i, b := range c.Nodes {
				if err := os.WriteFile(fmt.Sprintf("%s/node-%d.log", dir, i+1), []byte(b.Out.String()), 0o644); err != nil {
					t.Logf("keeping node %d's log: %v", i+1, err)
				}
			}
		})
	}
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	const topic, txTopic, partitions, txPartitions = "netf", "netf-tx", 4, 2
	// The active controller leads partitions 0 and 3, so the first fault
	// cuts off a leader that is also the controller.
	ctrl0 := c.Controller(20 * time.Second)
	var o []int32
	for id := int32(1); id <= 3; id++ {
		if id != ctrl0 {
			o = append(o, id)
		}
	}
	harness.CreateAssigned(t, c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)), topic,
		[][]int32{{ctrl0, o[0], o[1]}, {o[0], ctrl0, o[1]}, {o[1], o[0], ctrl0}, {ctrl0, o[1], o[0]}},
		map[string]string{"min.insync.replicas": "2"})
	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs", harness.FullISR(topic, partitions))
	harness.CreateRF3Topic(t, adm, txTopic, txPartitions)
	whole := func(m kadm.Metadata) bool {
		return harness.FullISR(topic, partitions)(m) && harness.FullISR(txTopic, txPartitions)(m)
	}

	h := newNetHistory()
	h.runIdempotent(t, c.Addrs(), topic, partitions)
	h.runTransactional(t, c.Addrs(), txTopic, txPartitions)
	stopLoad := sync.OnceFunc(func() { h.stopped.Store(true); h.wg.Wait() })
	t.Cleanup(stopLoad)
	h.waitAcked(t, partitions, time.Now(), 30*time.Second)

	// except lists the nodes (0-based) other than v.
	except := func(v int) []int {
		var out []int
		for i := range 3 {
			if i != v {
				out = append(out, i)
			}
		}
		return out
	}
	// roles reads who leads partition 0 and who is the active controller.
	roles := func() (leader, ctrl int, others []int) {
		m := harness.WaitMetadata(t, adm, 60*time.Second, "whole ISRs", whole)
		p0, _ := m.Topics[topic].Partitions[0]
		leader, ctrl = int(p0.Leader-1), int(c.Controller(20*time.Second)-1)
		return leader, ctrl, except(leader)
	}
	// waitWholeISRs asks every broker directly, each with a short
	// timeout, until one reports whole ISRs for both topics: a client's
	// metadata call can be routed to a broker still catching up and retried
	// with backoff, which measured seconds the cluster did not take.
	direct := make([]*kgo.Client, 3)
	for i := range direct {
		direct[i] = c.Node(int32(i+1)).Client(t, kgo.SeedBrokers(c.Node(int32(i+1)).Addr))
	}
	waitWholeISRs := func(what string) {
		t.Helper()
		harness.Eventually(t, 90*time.Second, what+": ISRs whole after the heal", func() (bool, string) {
			for _, cl := range direct {
				req := kmsg.NewPtrMetadataRequest()
				for _, name := range []string{topic, txTopic} {
					rt := kmsg.NewMetadataRequestTopic()
					rt.Topic = kmsg.StringPtr(name)
					req.Topics = append(req.Topics, rt)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
				cancel()
				if err == nil && harness.MetadataWhole(resp, map[string]int{topic: partitions, txTopic: txPartitions}) {
					return true, ""
				}
			}
			return false, "no broker reports them whole"
		})
	}
	// RINGLOG_NETFAULTS_ONLY (a comma list of fault names) runs only
	// those faults of the schedule, to reproduce one.
	var only map[string]bool
	if v := os.Getenv("RINGLOG_NETFAULTS_ONLY"); v != "" {
		only = map[string]bool{}
		for _, n := range strings.Split(v, ",") {
			only[strings.TrimSpace(n)] = true
		}
	}
	type result struct {
		skipped         bool
		name            string
		held            time.Duration
		w               window
		isrWhole        time.Duration
		probe           string
		leaderIsCtrl    bool
		notLeaderAnswer string
	}
	var results []result
	// fault injects with inject (which returns a probe's verdict), holds
	// it for hold (during which during runs, if set), heals, and waits for
	// whole ISRs.
	fault := func(name string, hold time.Duration, inject func() string, during func(start time.Time), heal func()) result {
		t.Helper()
		if only != nil && !only[name] {
			return result{name: name, skipped: true}
		}
		start := time.Now()
		t.Logf("fault %s: injecting at %s", name, start.Format("15:04:05.000"))
		probe := inject()
		if during != nil {
			during(start)
		}
		if d := hold - time.Since(start); d > 0 {
			time.Sleep(d) // real time: the fault is held this long
		}
		healed := time.Now()
		heal()
		waitWholeISRs(name)
		r := result{name: name, held: healed.Sub(start), isrWhole: time.Since(healed), probe: probe}
		// The window closes once every partition is acknowledged again, so
		// it holds the whole gap the fault caused.
		h.waitAcked(t, partitions, time.Now(), 60*time.Second)
		r.w = h.window(start, time.Now())
		t.Logf("fault %s: held %v, probe %s, longest without acks %v (partition %d), slowest ack %v (answered at %s), ISRs whole %v after the heal",
			name, r.held.Round(time.Millisecond), probe, r.w.unavailable.Round(time.Millisecond), r.w.gapPart,
			r.w.maxAck.Round(time.Millisecond), r.w.maxAckAt.Format("15:04:05.000"), r.isrWhole.Round(time.Millisecond))
		return r
	}
	// cutProbe checks that a cannot reach b while the clients reach a.
	cutProbe := func(a, b int) string {
		if tn.Reachable(c, a, b, time.Second) {
			t.Fatalf("probe: node %d still reaches node %d through the cut", a+1, b+1)
		}
		if !tn.Reachable(c, -1, a, 2*time.Second) {
			t.Fatalf("probe: the clients no longer reach node %d", a+1)
		}
		return fmt.Sprintf("node %d cannot reach node %d, clients reach it", a+1, b+1)
	}
	heal := func() { tn.SetRules(nft) }

	// leaderCut cuts off victim, which leads partition part, from both
	// other brokers for leaderCut, clients still connected to it. Once
	// its controller lease has lapsed it must answer produce and fetch
	// with NOT_LEADER_OR_FOLLOWER, and no acknowledgement may take longer
	// than the session timeout plus 3 s.
	leaderCutFault := func(name string, hold time.Duration, victim int, part int32, ctrl int) result {
		rest := except(victim)
		r := fault(name, hold, func() string {
			tn.SetRules(nft, tn.CutRules([]int{victim}, rest)...)
			return cutProbe(victim, rest[0])
		}, func(start time.Time) {
			// Once its lease has lapsed (the clients still reach its
			// /healthz), the cut-off leader must refuse to act as one.
			c.Node(int32(victim+1)).WaitHealth(time.Until(start.Add(2*harness.SessionTimeout+2*time.Second)),
				fmt.Sprintf("node %d no longer active into the cut", victim+1),
				func(h map[string]any) bool { return !harness.Active(h) })
			cl := c.Node(int32(victim+1)).Client(t, kgo.SeedBrokers(c.Node(int32(victim+1)).Addr))
			b := cl.SeedBrokers()[0]
			code, err := harness.RawProduce(b, topic, part, -1, 2*time.Second, "netf-raw")
			fcode, ferr := rawFetch(b, topic, part)
			if err != nil || code != kerr.NotLeaderForPartition.Code || ferr != nil || fcode != kerr.NotLeaderForPartition.Code {
				t.Errorf("node %d, cut off for %v: produce to partition %d answered %s, fetch %s; want NOT_LEADER_OR_FOLLOWER for both",
					victim+1, time.Since(start).Round(time.Millisecond), part, harness.AnswerName(code, err), harness.AnswerName(fcode, ferr))
			}
		}, heal)
		r.leaderIsCtrl = victim == ctrl
		if limit := harness.SessionTimeout + 3*time.Second; !r.skipped && r.w.maxAck > limit {
			t.Errorf("%s: cut off for %v, an acknowledgement took %v; want at most the session timeout + 3 s (%v)",
				name, r.held.Round(time.Millisecond), r.w.maxAck, limit)
		}
		return r
	}
	// ledByOther is a partition led by a broker other than the controller.
	ledByOther := func(ctrl int) (int, int32) {
		m := harness.WaitMetadata(t, adm, 60*time.Second, "whole ISRs", whole)
		for p := range int32(partitions) {
			if l := int(m.Topics[topic].Partitions[p].Leader - 1); l != ctrl {
				return l, p
			}
		}
		t.Fatalf("every partition of %s led by the controller %d", topic, ctrl+1)
		return 0, 0
	}

	// The steps of the schedule. Each reads the roles afresh, then runs
	// its fault held for hold (the fixed schedule uses each step's own).
	type step struct {
		name string
		hold time.Duration
		run  func(name string, hold time.Duration) result
	}
	// lossProbe measures the drop rate over 3 s of the load's own frames
	// (a measurement window, not a wait for a condition).
	lossProbe := func(pct int) string {
		time.Sleep(3 * time.Second) // real time: the window measured
		n := tn.Counters(nft)
		seen, lost := sumPrefix(n, "seen-"), sumPrefix(n, "loss-")
		rate := float64(lost) / float64(max(seen, 1))
		if seen < 100 || rate < float64(pct)/300 || rate > float64(pct)*3/100 {
			t.Fatalf("probe: %d of %d frames dropped (%.1f%%), want about %d%%", lost, seen, 100*rate, pct)
		}
		return fmt.Sprintf("3 s: %d of %d frames dropped (%.1f%%)", lost, seen, 100*rate)
	}
	// cutNode cuts node v off from both other brokers.
	cutNode := func(name string, hold time.Duration, v int, during func(time.Time), healIt func()) result {
		rest := except(v)
		return fault(name, hold, func() string {
			tn.SetRules(nft, tn.CutRules([]int{v}, rest)...)
			return cutProbe(v, rest[0])
		}, during, healIt)
	}
	// follower is a broker that leads no partition 0 and, where it can
	// be, is not the controller.
	follower := func() int {
		_, ctrl, others := roles()
		if others[0] == ctrl {
			return others[1]
		}
		return others[0]
	}
	steps := []step{
		// The active controller, leader of partitions 0 and 3 at the
		// start, cut off from both other brokers: the quorum's minority,
		// and a leader.
		{"controller-and-leader-cut", leaderCut, func(name string, hold time.Duration) result {
			_, ctrl, _ := roles()
			m := harness.WaitMetadata(t, adm, 60*time.Second, "whole ISRs", whole)
			for p := range int32(partitions) {
				if int(m.Topics[topic].Partitions[p].Leader-1) == ctrl {
					return leaderCutFault(name, hold, ctrl, p, ctrl)
				}
			}
			l, p := ledByOther(ctrl)
			t.Logf("the controller (node %d) leads no partition; cutting node %d, leader of partition %d, instead", ctrl+1, l+1, p)
			return leaderCutFault(name, hold, l, p, ctrl)
		}},
		// A leader that is not the controller cut off from the
		// controller majority (both other brokers), clients still
		// connected to it.
		{"leader-cut-from-majority", leaderCut, func(name string, hold time.Duration) result {
			_, ctrl, _ := roles()
			victim, part := ledByOther(ctrl)
			return leaderCutFault(name, hold, victim, part, ctrl)
		}},
		// A follower cut off from the other brokers.
		{"follower-cut-from-brokers", 8 * time.Second, func(name string, hold time.Duration) result {
			return cutNode(name, hold, follower(), nil, heal)
		}},
		// The active controller in the minority (leading or not).
		{"controller-in-minority", 8 * time.Second, func(name string, hold time.Duration) result {
			_, ctrl, _ := roles()
			return cutNode(name, hold, ctrl, nil, heal)
		}},
		// A bridge: the leader and one follower no longer see each
		// other, both still see the third broker.
		{"bridge", 8 * time.Second, func(name string, hold time.Duration) result {
			leader, _, others := roles()
			return fault(name, hold, func() string {
				tn.SetRules(nft, tn.CutRules([]int{leader}, []int{others[0]})...)
				p := cutProbe(leader, others[0])
				if !tn.Reachable(c, leader, others[1], 2*time.Second) || !tn.Reachable(c, others[0], others[1], 2*time.Second) {
					t.Fatalf("probe: the bridge node %d is not reachable from both sides", others[1]+1)
				}
				return p + fmt.Sprintf(", both reach node %d", others[1]+1)
			}, nil, heal)
		}},
		// One way: the leader's frames to one follower are dropped, the
		// follower's to the leader delivered.
		{"one-way", 8 * time.Second, func(name string, hold time.Duration) result {
			leader, _, others := roles()
			return fault(name, hold, func() string {
				tn.SetRules(nft, tn.DropRule(leader, others[0], "oneway"), fmt.Sprintf(`iifname "%s" oifname "%s" counter comment "back"`, tn.Port(others[0]), tn.Port(leader)))
				var n map[string]int64
				took := harness.Eventually(t, time.Second, fmt.Sprintf("probe: one-way rule counters show frames dropped from node %d and passed back to it", leader+1), func() (bool, string) {
					n = tn.Counters(nft)
					return n["oneway"] > 0 && n["back"] > 0, fmt.Sprint(n)
				})
				return fmt.Sprintf("%v: %d frames %d->%d dropped, %d passed back", took.Round(time.Millisecond), n["oneway"], leader+1, others[0]+1, n["back"])
			}, nil, heal)
		}},
		// 10% loss on one follower's links.
		{"loss-10%-one-follower", 12 * time.Second, func(name string, hold time.Duration) result {
			_, _, others := roles()
			return fault(name, hold, func() string {
				tn.SetRules(nft, tn.LossRules(others[0], 10)...)
				return lossProbe(10)
			}, nil, heal)
		}},
		// 1% loss on every link between brokers.
		{"loss-1%-all-links", 8 * time.Second, func(name string, hold time.Duration) result {
			return fault(name, hold, func() string {
				tn.SetRules(nft, tn.LossRules(-1, 1)...)
				return lossProbe(1)
			}, nil, heal)
		}},
		// kill -9 and restart of a follower while it is cut off.
		{"kill-9-and-restart-while-cut", 10 * time.Second, func(name string, hold time.Duration) result {
			f := follower()
			return cutNode(name, hold, f, func(time.Time) {
				time.Sleep(min(2*time.Second, hold/4)) // real time: killed well into the cut
				b := c.Node(int32(f + 1))
				b.Kill9()
				b.Launch() // cannot become ready before the heal
			}, func() {
				heal()
				c.Node(int32(f + 1)).WaitReady(60 * time.Second)
			})
		}},
		// A pause (SIGSTOP) across the heal: the leader cut off, stopped
		// while cut off, healed, and resumed 2 s later.
		{"pause-across-heal", 8 * time.Second, func(name string, hold time.Duration) result {
			leader, _, _ := roles()
			paused := c.Node(int32(leader + 1))
			return cutNode(name, hold, leader, func(time.Time) {
				time.Sleep(hold / 2) // real time: stopped halfway through the cut
				paused.Pause()
			}, func() {
				heal()
				time.Sleep(2 * time.Second) // real time: still stopped 2 s after the heal
				paused.Resume()
			})
		}},
	}
	// RINGLOG_NETFAULTS_SEED runs a randomized schedule instead:
	// RINGLOG_NETFAULTS_STEPS (default 12) steps drawn from the list with
	// the seed, each held for a random time between half and twice its
	// own. The seed is printed; the same seed draws the same schedule.
	plan := steps
	var holds []time.Duration
	for _, st := range steps {
		holds = append(holds, st.hold)
	}
	if v := os.Getenv("RINGLOG_NETFAULTS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("RINGLOG_NETFAULTS_SEED: %v", err)
		}
		n := 12
		if v := os.Getenv("RINGLOG_NETFAULTS_STEPS"); v != "" {
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				t.Fatalf("RINGLOG_NETFAULTS_STEPS %q: want a count", v)
			}
		}
		rng := rand.New(rand.NewPCG(seed, seed))
		plan, holds = nil, nil
		for range n {
			st := steps[rng.IntN(len(steps))]
			plan = append(plan, st)
			holds = append(holds, st.hold/2+time.Duration(rng.Int64N(int64(st.hold*3/2))))
		}
		fmt.Printf("netfaults: seed=%d steps=%d\n", seed, n)
	}
	for i, st := range plan {
		results = append(results, st.run(st.name, holds[i]))
	}

	stopLoad()
	harness.WaitMetadata(t, adm, 60*time.Second, "whole ISRs at the end", whole)
	harness.WaitIdentical(t, c, topic, partitions, 30*time.Second)
	logs := harness.ReadBack(t, c, topic, partitions)
	seen := readCommitted(t, c, txTopic, txPartitions)
	h.mu.Lock()
	chk := checkNetHistory(h.acks, logs, h.txns, seen)
	errs := fmt.Sprint(h.errs)
	h.mu.Unlock()
	for _, r := range results {
		if r.skipped {
			continue
		}
		fmt.Printf("netfaults: fault=%s held_ms=%d unavailable_ms=%d slowest_ack_ms=%d isr_whole_ms=%d leader_is_controller=%v probe=%q\n",
			r.name, r.held.Milliseconds(), r.w.unavailable.Milliseconds(), r.w.maxAck.Milliseconds(), r.isrWhole.Milliseconds(), r.leaderIsCtrl, r.probe)
	}
	fmt.Printf("netfaults: io=%s attempts=%d acknowledged=%d in_log=%d lost=%d moved=%d duplicated=%d reordered=%d offset_conflicts=%d txns_committed=%d txns_aborted=%d txns_unknown=%d tx_lost=%d tx_aborted_visible=%d tx_partial=%d tx_duplicated=%d errors=%s\n",
		harness.IOMode(), h.attempts.Load(), chk.acked, chk.inLog, chk.lost, chk.moved, chk.duplicated, chk.reordered, chk.offsetConflicts,
		chk.txCommitted, chk.txAborted, chk.txUnknown, chk.txLost, chk.txAbortedVisible, chk.txPartial, chk.txDuplicated, errs)
	h.mu.Lock()
	for _, e := range h.txErrs {
		t.Log(e)
	}
	h.mu.Unlock()
	for _, p := range chk.problems {
		t.Error(p)
	}
	if chk.txLost > 0 {
		explainTxLoss(t, c, txTopic, txPartitions, h.txns, seen)
	}
	if chk.bad() {
		t.Fatal("the checker found anomalies")
	}
	if chk.acked == 0 || chk.txCommitted == 0 || chk.txAborted == 0 {
		t.Fatalf("the workload did too little: %d acknowledged, %d transactions committed, %d aborted", chk.acked, chk.txCommitted, chk.txAborted)
	}
}

// rawFetch sends one Fetch of topic/partition from offset 0 to b and
// returns the partition's error code.
func rawFetch(b *kgo.Broker, topic string, partition int32) (int16, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
	req.Version = 12 // topic names, not ids
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, 0, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		return -1, err
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("malformed fetch response %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}
