package share

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// procChildEnv carries a procChildSpec (JSON): the test binary started
// with it runs TestShareProcChild, one share consumer.
const procChildEnv = "RINGLOG_SHARE_PROC_CHILD"

// procChildSpec configures one consumer process.
type procChildSpec struct {
	Addrs        []string
	Group, Topic string
	Log          string
	Work         time.Duration // per record
	Until        time.Time     // the child exits then whatever happens
}

// What the consumers do with a record, by key: the poison is released on
// every delivery (so the broker archives it after its fifth), a few are
// released on their first delivery and a few rejected; the rest are
// accepted.
const procPoison = 100

func procReleased(key int) bool { return key%1000 == 7 }
func procRejected(key int) bool { return key%1000 == 13 }

func procAction(key int, dc int32) kgo.AckStatus {
	switch {
	case key == procPoison:
		return kgo.AckRelease
	case procRejected(key):
		return kgo.AckReject
	case procReleased(key) && dc == 1:
		return kgo.AckRelease
	}
	return kgo.AckAccept
}

// TestShareProcChild is a share consumer run as a child process of
// TestShareGroupProcesses, which SIGKILLs some of them. Its log (the
// test reads it) has one line per event:
//
//	B seq n                    batch seq of n records polled
//	P seq offset dc key ack    record processed (ack: accept, release, reject)
//	K seq unixnanos            the batch's acknowledgements confirmed
//	F seq unixnanos error      they were not (the broker may or may not have them)
//
// A batch's P lines are fsynced before its acknowledgements are sent, so
// everything acknowledged is in the log, whenever the child dies.
func TestShareProcChild(t *testing.T) {
	raw := os.Getenv(procChildEnv)
	if raw == "" {
		t.Skip("child of TestShareGroupProcesses")
	}
	var s procChildSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	say := func(format string, args ...any) {
		// One write per line: a SIGKILL loses whole lines only.
		if _, err := f.WriteString(fmt.Sprintf(format, args...) + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	var ackErrs atomic.Int64
	var lastErr atomic.Value
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addrs...), kgo.ShareGroup(s.Group), kgo.ConsumeTopics(s.Topic),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.ShareMaxRecords(50), harness.FreshMetadata,
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			for _, r := range rs {
				if r.Err != nil {
					ackErrs.Add(1)
					lastErr.Store(r.Err.Error())
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for seq := 1; time.Now().Before(s.Until); {
		ctx, cancel := context.WithDeadline(context.Background(), s.Until)
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		recs := cl.PollFetches(pctx).Records()
		pcancel()
		if len(recs) == 0 {
			cancel()
			continue
		}
		before := ackErrs.Load()
		say("B %d %d", seq, len(recs))
		acks := make([]kgo.AckStatus, len(recs))
		for i, r := range recs {
			key, err := strconv.Atoi(string(r.Key))
			if err != nil {
				t.Fatalf("record at %d: key %q", r.Offset, r.Key)
			}
			acks[i] = procAction(key, r.DeliveryCount())
			time.Sleep(s.Work)
			say("P %d %d %d %d %s", seq, r.Offset, r.DeliveryCount(), key, acks[i])
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			r.Ack(acks[i])
		}
		fctx, fcancel := context.WithTimeout(ctx, 15*time.Second)
		err := cl.FlushAcks(fctx)
		fcancel()
		cancel()
		if err == nil && ackErrs.Load() == before {
			say("K %d %d", seq, time.Now().UnixNano())
		} else {
			if err == nil {
				err = fmt.Errorf("%v", lastErr.Load())
			}
			say("F %d %d %v", seq, time.Now().UnixNano(), err)
		}
		seq++
	}
}

// procChild is one consumer process.
type procChild struct {
	name   string
	log    string
	cmd    *exec.Cmd
	stderr *harness.SyncBuffer
	exited chan struct{}
	killed bool // by the test, mid-batch
}

func (c *procChild) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

func startProcChild(t *testing.T, name string, s procChildSpec) *procChild {
	t.Helper()
	raw, _ := json.Marshal(s)
	c := &procChild{name: name, log: s.Log, stderr: &harness.SyncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run", "^TestShareProcChild$", "-test.v", "-test.timeout", (time.Until(s.Until) + time.Minute).Round(time.Second).String())
	c.cmd.Env = append(os.Environ(), procChildEnv+"="+string(raw), "RINGLOG_TEST_BIN="+harness.RinglogBin)
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	// Children must not outlive a test binary that dies.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	return c
}

// procDelivery is one P line.
type procDelivery struct {
	child  int
	seq    int
	offset int64
	dc     int32
	key    int
	ack    string
}

// procBatch is what the log says of one polled batch.
type procBatch struct {
	n, processed int
	confirmed    bool // K
	confirmedAt  time.Time
	failedAt     time.Time
	failed       string // F
}

// procLog tails one child's log.
type procLog struct {
	child   int
	path    string
	read    int64
	partial []byte
	batches map[int]*procBatch
	last    int // seq of the last B line
	got     []procDelivery
}

// update parses what was appended since the last call.
func (l *procLog) update(t *testing.T) {
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(l.read, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	l.read += int64(len(data))
	data = append(l.partial, data...)
	i := bytes.LastIndexByte(data, '\n')
	if i < 0 {
		l.partial = data
		return
	}
	l.partial = slices.Clone(data[i+1:])
	for _, ln := range strings.Split(string(data[:i]), "\n") {
		fs := strings.Fields(ln)
		num := func(j int) int64 {
			if j >= len(fs) {
				t.Fatalf("%s: short line %q", l.path, ln)
			}
			v, err := strconv.ParseInt(fs[j], 10, 64)
			if err != nil {
				t.Fatalf("%s: line %q: %v", l.path, ln, err)
			}
			return v
		}
		seq := int(num(1))
		switch fs[0] {
		case "B":
			l.batches[seq] = &procBatch{n: int(num(2))}
			l.last = seq
		case "P":
			l.batches[seq].processed++
			l.got = append(l.got, procDelivery{child: l.child, seq: seq, offset: num(2), dc: int32(num(3)), key: int(num(4)), ack: fs[5]})
		case "K":
			l.batches[seq].confirmed = true
			l.batches[seq].confirmedAt = time.Unix(0, num(2))
		case "F":
			l.batches[seq].failedAt = time.Unix(0, num(2))
			l.batches[seq].failed = strings.Join(fs[3:], " ")
		default:
			t.Fatalf("%s: unknown line %q", l.path, ln)
		}
	}
}

// midBatch reports whether the child has processed part of a batch and
// not all of it: it holds records whose acknowledgements it has not sent.
func (l *procLog) midBatch() bool {
	b := l.batches[l.last]
	return b != nil && b.processed >= 1 && b.processed < b.n-1
}

// TestShareGroupProcesses (issue 35's criterion): 3 brokers, one RF 3
// partition of 50,000 records, 6 share consumers in child processes.
// Two consumers are SIGKILLed in the middle of a batch (and replaced),
// and the partition leader is killed with SIGKILL (and restarted) while
// the first one's records are still locked: they hold the start offset,
// so the acknowledgements taken meanwhile are in the in-flight window the
// new leader must take over. From
// the consumers' logs: every record is processed; one processed more
// than once was released, held by a killed consumer, or in a batch whose
// acknowledgement failed (only while the leader is down or moving), and
// comes back with a higher delivery count; no record whose
// acknowledgement was confirmed is delivered again (the leader kill
// loses none); the poison record is delivered 5 times, then archived.
func TestShareGroupProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	began := time.Now()
	c := harness.StartReplCluster(t, 3, harness.TxnBrokerArgs...)
	const (
		topic, group = "proc-queue", "proc-workers"
		n            = 50_000
		consumers    = 6
	)
	cl := harness.NewClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), harness.FreshMetadata)
	adm := kadm.NewClient(cl)
	harness.CreateRF3Topic(t, adm, topic, 1)
	// A 5 s lock brings a killed consumer's records back in seconds.
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", "5000", "share.delivery.count.limit", "5")
	harness.ProduceN(t, cl, topic, n)
	produced := time.Now()

	dir := t.TempDir()
	if keep := os.Getenv("RINGLOG_SHARE_PROC_LOGS"); keep != "" {
		// The consumers' logs, kept for a look after the run.
		dir = keep
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := procChildSpec{Addrs: c.Addrs(), Group: group, Topic: topic, Work: time.Millisecond, Until: time.Now().Add(3 * time.Minute)}
	var children []*procChild
	var logs []*procLog
	start := func() {
		i := len(children)
		s := spec
		s.Log = filepath.Join(dir, fmt.Sprintf("c%d.log", i))
		children = append(children, startProcChild(t, fmt.Sprintf("c%d", i), s))
		logs = append(logs, &procLog{child: i, path: s.Log, batches: map[int]*procBatch{}})
	}
	for range consumers {
		start()
	}
	defer func() {
		if t.Failed() {
			for _, ch := range children {
				out := ch.stderr.String()
				t.Logf("%s output (tail):\n%s", ch.name, out[max(0, len(out)-4000):])
			}
		}
	}()
	update := func() {
		for _, l := range logs {
			l.update(t)
		}
	}
	accepted := func() int {
		keys := map[int]bool{}
		for _, l := range logs {
			for _, d := range l.got {
				if d.ack == "accept" {
					keys[d.key] = true
				}
			}
		}
		return len(keys)
	}
	waitAccepted := func(k int) {
		t.Helper()
		harness.EventuallyEvery(t, 100*time.Millisecond, 90*time.Second, fmt.Sprintf("%d records accepted", k), func() (bool, string) {
			update()
			a := accepted()
			return a >= k, fmt.Sprintf("%d accepted", a)
		})
	}
	// killMidBatch SIGKILLs a consumer holding records it has processed
	// part of, and starts another in its place. It returns the first
	// offset of the batch the consumer held.
	killMidBatch := func() int64 {
		t.Helper()
		var victim int
		harness.EventuallyEvery(t, 2*time.Millisecond, 20*time.Second, "a consumer in the middle of a batch", func() (bool, string) {
			for i, l := range logs {
				if children[i].killed {
					continue
				}
				l.update(t)
				if l.midBatch() {
					victim = i
					return true, ""
				}
			}
			return false, "none"
		})
		children[victim].killed = true
		children[victim].kill()
		logs[victim].update(t)
		b := logs[victim].batches[logs[victim].last]
		t.Logf("%s SIGKILLed after %d of its batch's %d records", children[victim].name, b.processed, b.n)
		start()
		held := int64(-1)
		for _, d := range logs[victim].got {
			if d.seq == logs[victim].last && (held < 0 || d.offset < held) {
				held = d.offset
			}
		}
		return held
	}

	waitAccepted(15_000)
	// The leader is killed while the killed consumer's records are still
	// locked (5 s): they hold the share-partition start offset below
	// them, so what is acknowledged meanwhile is above it, in the
	// in-flight window whose state the new leader must take over whole.
	held := killMidBatch()
	heldAt := time.Now()
	base := accepted()
	if !harness.WaitUpTo(3*time.Second, func() bool { update(); return accepted() >= base+1000 }) {
		t.Logf("only %d records accepted in the 3 s after the consumer kill", accepted()-base)
	}
	leader := harness.PartitionLeader(t, adm, topic, 1, 0)
	c.Node(leader).Kill9()
	leaderKilled := time.Now()
	survivors := kadm.NewClient(harness.NewClient(t, c.Addrs(leader), harness.FreshMetadata))
	harness.WaitMetadata(t, survivors, 30*time.Second, "a new partition leader", func(m kadm.Metadata) bool {
		l := m.Topics[topic].Partitions[0].Leader
		return l >= 0 && l != leader
	})
	t.Logf("node %d (partition leader) killed %v after the consumer; new leader after %v", leader,
		leaderKilled.Sub(heldAt).Round(time.Millisecond), time.Since(leaderKilled).Round(time.Millisecond))
	c.Node(leader).Restart()
	harness.WaitMetadata(t, adm, 60*time.Second, "full ISR after the restart", harness.FullISR(topic, 1))
	// Acknowledgements in flight to the killed leader fail; so may those
	// sent while leadership settles (the restarted broker may lead again).
	faultEnd := time.Now().Add(10 * time.Second)

	waitAccepted(32_000)
	killMidBatch()

	// Done when the share-partition start offset reaches the log end:
	// every record acknowledged or archived.
	harness.EventuallyEvery(t, 500*time.Millisecond, 120*time.Second, "share-partition start offset at the log end", func() (bool, string) {
		update()
		so, err := describeStartOffset(cl, group, topic)
		return err == nil && so == n, fmt.Sprintf("start offset %d (%v), %d records accepted", so, err, accepted())
	})
	consumed := time.Now()
	update()
	delivered := 0
	for _, l := range logs {
		delivered += len(l.got)
	}
	// The consumers keep polling: a record delivered again now would be
	// logged within a second (fetches wait 500 ms at most), and every
	// record is finished, so any delivery at all is wrong.
	harness.Holds(t, 2*time.Second, "nothing delivered once every record is finished", func() (bool, string) {
		update()
		now := 0
		for _, l := range logs {
			now += len(l.got)
		}
		return now == delivered, fmt.Sprintf("%d deliveries, %d when the start offset reached the end", now, delivered)
	})
	for _, ch := range children {
		ch.kill()
	}
	update()

	// The checks, from the logs.
	type ref struct {
		procDelivery
		batch *procBatch
	}
	byKey := map[int][]ref{}
	offsetOf := map[int]int64{}
	for _, l := range logs {
		for _, d := range l.got {
			byKey[d.key] = append(byKey[d.key], ref{d, l.batches[d.seq]})
			if o, ok := offsetOf[d.key]; ok && o != d.offset {
				t.Errorf("key %d at offsets %d and %d", d.key, o, d.offset)
			}
			offsetOf[d.key] = d.offset
		}
	}
	failedBatches := 0
	failures := map[string]int{} // why, for the log
	var lastFail time.Duration
	for _, l := range logs {
		for seq, b := range l.batches {
			if b.failed == "" {
				continue
			}
			failedBatches++
			failures[b.failed[:min(len(b.failed), 100)]]++
			lastFail = max(lastFail, b.failedAt.Sub(leaderKilled))
			if b.failedAt.Before(leaderKilled) || b.failedAt.After(faultEnd) {
				t.Errorf("c%d batch %d: acknowledgement failed at %v, outside the leader failover (%v to %v): %s",
					l.child, seq, b.failedAt.Format(time.StampMilli), leaderKilled.Format(time.StampMilli), faultEnd.Format(time.StampMilli), b.failed)
			}
		}
	}
	if failedBatches > 0 {
		t.Logf("acknowledgements failed for %d batches, the last %v after the leader kill: %v", failedBatches, lastFail.Round(time.Millisecond), failures)
	}
	redelivered, maxDC, killedHeld := 0, int32(0), 0
	errs := 0
	bad := func(format string, args ...any) {
		if errs++; errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	for key := range n {
		ds := byKey[key]
		if len(ds) == 0 {
			bad("key %d never processed", key)
			continue
		}
		// Deliveries of one record are sequential: each after the last
		// one's lock ended, with a higher delivery count.
		slices.SortFunc(ds, func(a, b ref) int { return int(a.dc - b.dc) })
		for i, d := range ds {
			maxDC = max(maxDC, d.dc)
			if i > 0 && d.dc <= ds[i-1].dc {
				bad("key %d delivered twice with delivery count %d", key, d.dc)
			}
			if i == 0 {
				continue
			}
			redelivered++
			p := ds[i-1]
			switch {
			case p.ack == "release":
			case p.batch.failed != "":
			case children[p.child].killed && !p.batch.confirmed:
				killedHeld++
			case p.batch.confirmed:
				bad("key %d (offset %d): %s confirmed by c%d at delivery %d, delivered again (delivery %d, c%d)", key, d.offset, p.ack, p.child, p.dc, d.dc, d.child)
			default:
				bad("key %d (offset %d): delivered again (delivery %d, c%d) with no cause: c%d's delivery %d was %s, unconfirmed, not killed", key, d.offset, d.dc, d.child, p.child, p.dc, p.ack)
			}
		}
		last := ds[len(ds)-1]
		switch {
		case key == procPoison:
			var dcs []int32
			for _, d := range ds {
				dcs = append(dcs, d.dc)
			}
			if !slices.Equal(dcs, []int32{1, 2, 3, 4, 5}) {
				bad("poison key %d delivered with counts %v, want [1 2 3 4 5] and never again", key, dcs)
			}
		case procRejected(key) && last.ack != "reject":
			bad("rejected key %d: last delivery %s", key, last.ack)
		case !procRejected(key) && last.ack != "accept":
			bad("key %d: last delivery %s (delivery %d), never accepted", key, last.ack, last.dc)
		}
	}
	// The leader kill tested what it is meant to: acknowledgements
	// confirmed above the start offset the killed consumer's records held
	// (none of them came back, as checked above).
	above := 0
	for _, l := range logs {
		for _, d := range l.got {
			if b := l.batches[d.seq]; d.offset > held && b.confirmed && b.confirmedAt.Before(leaderKilled) && d.ack != "release" {
				above++
			}
		}
	}
	if above == 0 {
		bad("no acknowledgement confirmed above offset %d (held by the killed consumer) before the leader kill", held)
	}
	// A killed consumer's batch was cut short before its
	// acknowledgements were sent: every record of it it had processed
	// comes back.
	for i, l := range logs {
		if !children[i].killed {
			continue
		}
		for _, d := range l.got {
			if d.seq != l.last || d.key == procPoison {
				continue
			}
			ds := byKey[d.key]
			if ds[len(ds)-1].dc <= d.dc {
				bad("key %d held by the killed c%d (delivery %d) not redelivered", d.key, i, d.dc)
			}
		}
	}
	if errs > 20 {
		t.Errorf("... %d errors in all", errs)
	}
	summary := fmt.Sprintf("share-procs: %d records, %d consumers (%d killed), %d deliveries, %d redeliveries (%d held by killed consumers, %d batches' acks failed in the leader failover), %d acks in the in-flight window kept through the leader kill, max delivery count %d, consumed in %v (produce %v, total %v)",
		n, len(children), len(children)-consumers, delivered, redelivered, killedHeld, failedBatches, above, maxDC,
		consumed.Sub(produced).Round(100*time.Millisecond), produced.Sub(began).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	t.Log(summary)
	fmt.Println(summary)
}
