package txn

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/internal/testwait"
)

func TestCommitFlow(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.mustInit("tx")
	if pid != 1000 || epoch != 0 {
		t.Fatalf("init: %d/%d", pid, epoch)
	}
	if err := h.add("tx", pid, epoch, tp("a", 1), tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, h.m.AddOffsets("tx", pid, epoch, "grp")); err != nil {
		t.Fatal(err)
	}
	offs := tp(OffsetsTopic, statelog.PartitionFor("grp", 3))
	d := h.describe("tx")
	if d.State != Ongoing || !slices.Equal(d.Partitions, []TopicPartition{offs, tp("a", 0), tp("a", 1)}) || d.StartMs != h.clock.Now().UnixMilli() {
		t.Fatalf("ongoing: %+v", d)
	}
	if err := h.end("tx", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	if d := h.describe("tx"); d.State != PrepareCommit {
		t.Fatalf("after EndTxn: %v", d.State)
	}
	job := h.mk.wait(t, 0)
	if !job.Commit || job.ProducerID != pid || job.ProducerEpoch != 0 || job.CoordinatorEpoch != 7 || len(job.Partitions) != 3 {
		t.Fatalf("markers %+v", job)
	}
	// While markers are in flight the id is busy.
	if err := h.add("tx", pid, epoch, tp("b", 0)); !is(err, ErrConcurrentTransactions) {
		t.Fatalf("add during PrepareCommit: %v", err)
	}
	if err := h.end("tx", pid, epoch, true); !is(err, ErrConcurrentTransactions) {
		t.Fatalf("commit retry during PrepareCommit: %v", err)
	}
	if err := h.end("tx", pid, epoch, false); !is(err, ErrInvalidTxnState) {
		t.Fatalf("abort during PrepareCommit: %v", err)
	}
	if r := h.init("tx", -1, -1); !is(r.Err, ErrConcurrentTransactions) {
		t.Fatalf("init during PrepareCommit: %v", r.Err)
	}
	h.mk.complete(0, nil)
	d = h.waitState("tx", CompleteCommit)
	if len(d.Partitions) != 0 {
		t.Fatalf("complete keeps partitions: %+v", d)
	}
	if err := h.end("tx", pid, epoch, true); err != nil {
		t.Fatalf("commit retry after completion: %v", err)
	}
	if err := h.end("tx", pid, epoch, false); !is(err, ErrInvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
	// The next transaction starts fresh.
	h.clock.Advance(time.Second)
	if err := h.add("tx", pid, epoch, tp("b", 0)); err != nil {
		t.Fatal(err)
	}
	if d := h.describe("tx"); !slices.Equal(d.Partitions, []TopicPartition{tp("b", 0)}) || d.StartMs != h.clock.Now().UnixMilli() {
		t.Fatalf("second txn: %+v", d)
	}
	want := []State{Empty, Ongoing, Ongoing, PrepareCommit, CompleteCommit, Ongoing}
	if got := h.states("tx"); !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if err := h.end("tx", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	if j := h.mk.wait(t, 1); j.Commit || !slices.Equal(j.Partitions, []TopicPartition{tp("b", 0)}) {
		t.Fatalf("abort markers %+v", j)
	}
	h.mk.complete(1, nil)
	h.waitState("tx", CompleteAbort)
	// Re-adding a partition already in an Ongoing txn writes nothing.
	if err := h.add("tx", pid, epoch, tp("c", 0)); err != nil {
		t.Fatal(err)
	}
	n := len(h.states("tx"))
	if err := h.add("tx", pid, epoch, tp("c", 0)); err != nil || len(h.states("tx")) != n {
		t.Fatalf("idempotent add wrote a record: %v", err)
	}
}

func TestEndTxnErrors(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.mustInit("tx")
	if err := h.end("tx", pid, epoch, true); !is(err, ErrInvalidTxnState) {
		t.Fatalf("commit with nothing open: %v", err)
	}
	if err := h.end("nope", pid, epoch, true); !is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := h.end("tx", pid+1, epoch, true); !is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("wrong pid: %v", err)
	}
	if err := h.end("tx", pid, epoch+1, true); !is(err, ErrProducerFenced) {
		t.Fatalf("wrong epoch: %v", err)
	}
	if err := h.add("nope", pid, epoch, tp("a", 0)); !is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("add to unknown id: %v", err)
	}
	// A failing append leaves the state as it was.
	h.p.Fail(group.ErrAppendFailed)
	if err := h.add("tx", pid, epoch, tp("a", 0)); !is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("failed append: %v", err)
	}
	h.p.Fail(nil)
	if d := h.describe("tx"); d.State != Empty || len(d.Partitions) != 0 {
		t.Fatalf("after failed append: %+v", d)
	}
	// A pending append makes everything else wait.
	h.p.Hold()
	f := h.m.AddPartitions(AddPartitionsRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, Partitions: []TopicPartition{tp("a", 0)}})
	if err := h.end("tx", pid, epoch, false); !is(err, ErrConcurrentTransactions) {
		t.Fatalf("EndTxn during a pending append: %v", err)
	}
	h.p.Release(nil)
	if r := wait(t, f); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
}

func TestFencingAbortsOngoingTxn(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.mustInit("tx")
	if err := h.add("tx", pid, e0, tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	// A second producer with the same transactional id.
	if r := h.init("tx", -1, -1); !is(r.Err, ErrConcurrentTransactions) {
		t.Fatalf("second init while the first has a txn open: %+v", r)
	}
	job := h.mk.wait(t, 0)
	if job.Commit || job.ProducerEpoch != 1 || !slices.Equal(job.Partitions, []TopicPartition{tp("a", 0)}) {
		t.Fatalf("fencing abort markers %+v", job)
	}
	// The old producer is fenced at once.
	if err := h.end("tx", pid, e0, true); !is(err, ErrProducerFenced) {
		t.Fatalf("old producer's commit: %v", err)
	}
	if err := h.add("tx", pid, e0, tp("b", 0)); !is(err, ErrProducerFenced) {
		t.Fatalf("old producer's add: %v", err)
	}
	if r := h.init("tx", -1, -1); !is(r.Err, ErrConcurrentTransactions) {
		t.Fatalf("retry before markers are done: %+v", r)
	}
	h.mk.complete(0, nil)
	h.waitState("tx", CompleteAbort)
	r := h.init("tx", -1, -1)
	if r.Err != nil || r.ProducerID != pid || r.ProducerEpoch != 2 {
		t.Fatalf("retried init: %+v", r)
	}
	if got, want := h.states("tx"), []State{Empty, Ongoing, PrepareAbort, CompleteAbort, Empty}; !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

func TestTimeoutAbortsWithEpochBump(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.mustInit("tx")
	if err := h.add("tx", pid, e0, tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	h.m.Tick(h.clock.Advance(10 * time.Second))
	if d := h.describe("tx"); d.State != Ongoing {
		t.Fatalf("aborted at exactly the timeout: %v", d.State)
	}
	h.m.Tick(h.clock.Advance(time.Millisecond))
	job := h.mk.wait(t, 0)
	if job.Commit || job.ProducerEpoch != 1 {
		t.Fatalf("timeout markers %+v", job)
	}
	if err := h.end("tx", pid, e0, true); !is(err, ErrProducerFenced) {
		t.Fatalf("commit after timeout: %v", err)
	}
	// A failed marker job is sent again by the next Tick.
	h.mk.complete(0, group.ErrAppendFailed)
	// The failure reaches the manager on another goroutine; Tick until a
	// Tick after it has sent the job again (h.mk.wait fails if none did).
	testwait.Until(5*time.Second, func() bool {
		h.m.Tick(h.clock.Now())
		return h.mk.count() >= 2
	})
	h.mk.wait(t, 1)
	h.mk.complete(1, nil)
	if d := h.waitState("tx", CompleteAbort); d.ProducerEpoch != 1 {
		t.Fatalf("after timeout abort: %+v", d)
	}
	// KIP-360 recovery: the fenced epoch is refused, the current one
	// (which the producer learns from PRODUCER_FENCED's retry path) bumps.
	if r := h.init("tx", pid, e0); !is(r.Err, ErrProducerFenced) {
		t.Fatalf("recovery with a fenced epoch: %+v", r)
	}
	if r := h.init("tx", pid, 1); r.Err != nil || r.ProducerEpoch != 2 {
		t.Fatalf("recovery with the current epoch: %+v", r)
	}
}

func TestInitProducerIDVariants(t *testing.T) {
	h := newHarness(t)
	r := wait(t, h.m.InitProducerID(InitProducerIDRequest{ProducerID: -1, ProducerEpoch: -1}))
	r2 := wait(t, h.m.InitProducerID(InitProducerIDRequest{ProducerID: -1, ProducerEpoch: -1}))
	if r.Err != nil || r2.Err != nil || r.ProducerID == r2.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("idempotent ids: %+v %+v", r, r2)
	}
	empty := ""
	if r := wait(t, h.m.InitProducerID(InitProducerIDRequest{TransactionalID: &empty, TransactionTimeout: time.Second})); !is(r.Err, ErrInvalidRequest) {
		t.Fatal(r.Err)
	}
	id := "tx"
	for _, to := range []time.Duration{0, 16 * time.Minute} {
		if r := wait(t, h.m.InitProducerID(InitProducerIDRequest{TransactionalID: &id, TransactionTimeout: to})); !is(r.Err, ErrInvalidTransactionTimeout) {
			t.Fatalf("timeout %v: %v", to, r.Err)
		}
	}
	pid, e0 := h.mustInit("tx")
	// KIP-360: the current producer asks for a bump.
	if r := h.init("tx", pid, e0); r.Err != nil || r.ProducerEpoch != 1 {
		t.Fatalf("bump: %+v", r)
	}
	// Its answer was lost: the retry gets the same answer.
	if r := h.init("tx", pid, e0); r.Err != nil || r.ProducerEpoch != 1 {
		t.Fatalf("retry: %+v", r)
	}
	if r := h.init("tx", pid+5, 1); !is(r.Err, ErrProducerFenced) {
		t.Fatalf("another producer id: %+v", r)
	}
	// A plain re-init forgets the last epoch: the old retry is fenced now.
	if r := h.init("tx", -1, -1); r.ProducerEpoch != 2 {
		t.Fatalf("re-init: %+v", r)
	}
	if r := h.init("tx", pid, e0); !is(r.Err, ErrProducerFenced) {
		t.Fatalf("stale retry: %+v", r)
	}

	// Routing: an unowned partition and one still loading.
	h.m.Unload(h.m.Partition("tx"))
	if r := h.init("tx", -1, -1); !is(r.Err, ErrNotCoordinator) {
		t.Fatal(r.Err)
	}
	h.m.BeginLoad(h.m.Partition("tx"))
	if r := h.init("tx", -1, -1); !is(r.Err, ErrCoordinatorLoadInProgress) {
		t.Fatal(r.Err)
	}
	if _, err := h.m.Describe("tx"); !is(err, ErrCoordinatorLoadInProgress) {
		t.Fatal(err)
	}

	// Epoch exhaustion moves the id to a new producer id.
	old := Metadata{ProducerID: 77, ProducerEpoch: math.MaxInt16 - 1, TimeoutMs: 1000, State: CompleteCommit, StartMs: 5, LastUpdateMs: 6}
	h.m.FinishLoad(h.m.Partition("tx"), 9, &Snapshot{Txns: map[string]Metadata{"tx": old}})
	r = h.init("tx", 77, math.MaxInt16-1)
	if r.Err != nil || r.ProducerID == 77 || r.ProducerEpoch != 0 {
		t.Fatalf("exhausted epoch: %+v", r)
	}
	// The rotation's retry (old id, exhausted epoch) gets the same answer.
	if r2 := h.init("tx", 77, math.MaxInt16-1); r2.Err != nil || r2.ProducerID != r.ProducerID || r2.ProducerEpoch != 0 {
		t.Fatalf("rotation retry: %+v", r2)
	}
}

func TestVerifyOnly(t *testing.T) {
	h := newHarness(t)
	pid, e := h.mustInit("tx")
	verify := func(tps ...TopicPartition) []PartitionResult {
		return wait(t, h.m.AddPartitions(AddPartitionsRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: e, Partitions: tps, VerifyOnly: true}))
	}
	if r := verify(tp("a", 0)); !is(r[0].Err, ErrInvalidTxnState) {
		t.Fatalf("verify with no txn: %+v", r)
	}
	if err := h.add("tx", pid, e, tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	n := len(h.states("tx"))
	r := verify(tp("a", 0), tp("a", 1))
	if r[0].Err != nil || !is(r[1].Err, ErrInvalidTxnState) || r[1].TopicPartition != tp("a", 1) {
		t.Fatalf("verify: %+v", r)
	}
	if len(h.states("tx")) != n || len(h.describe("tx").Partitions) != 1 {
		t.Fatal("verify_only changed the transaction")
	}
	r = wait(t, h.m.AddPartitions(AddPartitionsRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: e + 1, Partitions: []TopicPartition{tp("a", 0)}, VerifyOnly: true}))
	if !is(r[0].Err, ErrProducerFenced) {
		t.Fatalf("verify with a fenced epoch: %+v", r)
	}
}

func TestLoadResumesPrepareCommit(t *testing.T) {
	h := newHarness(t)
	pid, e := h.mustInit("stuck")
	if err := h.add("stuck", pid, e, tp("a", 0), tp("b", 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.end("stuck", pid, e, true); err != nil {
		t.Fatal(err)
	}
	h.mk.wait(t, 0) // never completed: the coordinator dies here
	pid2, e2 := h.mustInit("open")
	if err := h.add("open", pid2, e2, tp("c", 0)); err != nil {
		t.Fatal(err)
	}
	h.mustInit("gone")
	h.clock.Advance(8 * 24 * time.Hour)
	h.m.Tick(h.clock.Now()) // "gone" expires (tombstone); "open" times out too
	h.mk.wait(t, 1)

	// A new coordinator takes over every partition from the records.
	h2 := newHarness(t)
	h2.clock = h.clock
	m2, err := NewManager(h2.cfg, h2.p, h2.ids, h2.mk, h2.clock)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(testParts) {
		m2.BeginLoad(p)
		snap, err := Load(Records(h.p.Records(p)))
		if err != nil {
			t.Fatal(err)
		}
		m2.FinishLoad(p, 8, snap)
	}
	h2.m = m2
	if _, err := m2.Describe("gone"); !is(err, ErrTransactionalIDNotFound) {
		t.Fatalf("expired id after load: %v", err)
	}
	d := h2.describe("stuck")
	if d.State != PrepareCommit || d.ProducerID != pid {
		t.Fatalf("loaded: %+v", d)
	}
	if d := h2.describe("open"); d.State != PrepareAbort || d.ProducerEpoch != e2+1 {
		t.Fatalf("loaded timed-out txn: %+v", d)
	}
	// Both Prepare* transactions get their markers again, with the new
	// coordinator epoch; order between them is not defined.
	jobs := []Markers{h2.mk.wait(t, 0), h2.mk.wait(t, 1)}
	slices.SortFunc(jobs, func(a, b Markers) int { return int(a.ProducerID - b.ProducerID) })
	if j := jobs[0]; !j.Commit || j.CoordinatorEpoch != 8 || !slices.Equal(j.Partitions, []TopicPartition{tp("a", 0), tp("b", 2)}) {
		t.Fatalf("resent markers %+v", j)
	}
	h2.mk.complete(0, nil)
	h2.mk.complete(1, nil)
	h2.waitState("stuck", CompleteCommit)
	h2.waitState("open", CompleteAbort)
	if got := h2.states("stuck"); !slices.Equal(got, []State{CompleteCommit}) {
		t.Fatalf("new coordinator wrote %v", got)
	}
	// The old coordinator's late completion is ignored once unloaded.
	for p := range int32(testParts) {
		h.m.Unload(p)
	}
	h.mk.complete(0, nil)
	if _, err := h.m.Describe("stuck"); !is(err, ErrNotCoordinator) {
		t.Fatal(err)
	}
}

func TestExpiry(t *testing.T) {
	h := newHarness(t)
	h.mustInit("idle")
	pid, e := h.mustInit("busy")
	if err := h.add("busy", pid, e, tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	h.m.Tick(h.clock.Now()) // first tick schedules the next expiry scan
	h.clock.Advance(7*24*time.Hour - time.Second)
	h.m.Tick(h.clock.Now())
	h.describe("idle") // scanned, but idle one second short of the expiration
	h.m.Tick(h.clock.Advance(time.Hour))
	testwait.For(t, 5*time.Second, "the idle id to expire", func() bool {
		_, err := h.m.Describe("idle")
		return is(err, ErrTransactionalIDNotFound)
	})
	if got := h.states("idle"); !slices.Equal(got, []State{Empty, Dead}) {
		t.Fatalf("records %v", got)
	}
	// An open transaction is never expired; it timed out instead.
	if d := h.describe("busy"); d.State != PrepareAbort {
		t.Fatalf("busy: %+v", d)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.RemoveExpiredInterval = 8 * 24 * time.Hour
	if c.Validate() == nil {
		t.Fatal("interval above expiration validated")
	}
	if _, err := NewManager(DefaultConfig(), nil, nil, nil, nil); err == nil {
		t.Fatal("NewManager without collaborators")
	}
}

// With EndTxnWait, EndTxn answers once the markers are written and the
// Complete record is durable, or after EndTxnWait when they are not.
func TestEndTxnWaitsForMarkers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.EndTxnWait = 5 * time.Second })
	pid, epoch := h.mustInit("tx")
	if err := h.add("tx", pid, epoch, tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	f := h.m.EndTxn(EndTxnRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, Commit: true})
	h.mk.wait(t, 0)
	select {
	case <-f.Done():
		t.Fatal("EndTxn answered while its markers were in flight")
	case <-time.After(50 * time.Millisecond):
	}
	h.mk.complete(0, nil)
	if err := wait(t, f); err != nil {
		t.Fatal(err)
	}
	if d := h.describe("tx"); d.State != CompleteCommit {
		t.Fatalf("answered in %v, want CompleteCommit", d.State)
	}

	// Markers that do not finish: the answer comes after EndTxnWait, the
	// outcome already decided.
	h2 := newHarness(t, func(c *Config) { c.EndTxnWait = 100 * time.Millisecond })
	pid, epoch = h2.mustInit("tx")
	if err := h2.add("tx", pid, epoch, tp("a", 0)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h2.end("tx", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("answered after %v, before EndTxnWait with markers in flight", el)
	}
	if d := h2.describe("tx"); d.State != PrepareAbort {
		t.Fatalf("state %v, want PrepareAbort", d.State)
	}
}

// AddPartitions arriving while another one's record is being written is
// answered after that write, from the state it leaves, not refused with
// CONCURRENT_TRANSACTIONS.
func TestAddPartitionsQueuedBehindWrite(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.mustInit("tx")
	h.p.Hold()
	first := h.m.AddPartitions(AddPartitionsRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, Partitions: []TopicPartition{tp("a", 0)}})
	second := h.m.AddPartitions(AddPartitionsRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, Partitions: []TopicPartition{tp("b", 0)}})
	select {
	case <-second.Done():
		t.Fatalf("second AddPartitions answered while the first was pending: %+v", second.Result())
	case <-time.After(20 * time.Millisecond):
	}
	h.p.Release(nil)
	for _, f := range []*Future[[]PartitionResult]{first, second} {
		for _, r := range wait(t, f) {
			if r.Err != nil {
				t.Fatalf("%v: %v", r.TopicPartition, r.Err)
			}
		}
	}
	if d := h.describe("tx"); d.State != Ongoing || !slices.Equal(d.Partitions, []TopicPartition{tp("a", 0), tp("b", 0)}) {
		t.Fatalf("after both: %+v", d)
	}
	// During PrepareCommit the client still gets CONCURRENT_TRANSACTIONS.
	if err := h.end("tx", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	if err := h.add("tx", pid, epoch, tp("c", 0)); !is(err, ErrConcurrentTransactions) {
		t.Fatalf("add during PrepareCommit: %v", err)
	}
}
