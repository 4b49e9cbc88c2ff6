package txn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/internal/testwait"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// fakeMarkers records marker jobs and completes each only when the test
// says so, from another goroutine, like WriteTxnMarkers round trips.
type fakeMarkers struct {
	mu   sync.Mutex
	jobs []Markers
	done []chan error
	cond chan struct{} // closed and replaced on every new job
}

func newFakeMarkers() *fakeMarkers { return &fakeMarkers{cond: make(chan struct{})} }

func (f *fakeMarkers) WriteMarkers(m Markers) statelog.Waiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan error, 1)
	f.jobs = append(f.jobs, m)
	f.done = append(f.done, ch)
	close(f.cond)
	f.cond = make(chan struct{})
	return statelog.WaiterFunc(func() error { return <-ch })
}

// wait returns job i once it exists.
func (f *fakeMarkers) wait(t *testing.T, i int) Markers {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		if i < len(f.jobs) {
			j := f.jobs[i]
			f.mu.Unlock()
			return j
		}
		c := f.cond
		f.mu.Unlock()
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("marker job %d never came", i)
		}
	}
}

func (f *fakeMarkers) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobs)
}

func (f *fakeMarkers) complete(i int, err error) {
	f.mu.Lock()
	ch := f.done[i]
	f.mu.Unlock()
	ch <- err
}

type harness struct {
	t       *testing.T
	m       *Manager
	p       *group.MemoryPersister
	mk      *fakeMarkers
	clock   *fakeClock
	ids     *CounterIDAllocator
	cfg     Config
	coordEp int32
}

const testParts = 4

// newHarness runs the state machine with Kafka's EndTxn (answered once
// the Prepare record is durable) unless an option changes the config.
func newHarness(t *testing.T, opts ...func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.TransactionLogPartitions = testParts
	cfg.OffsetsTopicPartitions = 3
	cfg.EndTxnWait = 0
	for _, o := range opts {
		o(&cfg)
	}
	h := &harness{t: t, p: group.NewMemoryPersister(), mk: newFakeMarkers(),
		clock: &fakeClock{t: time.UnixMilli(1_700_000_000_000)}, ids: &CounterIDAllocator{Next: 1000}, cfg: cfg, coordEp: 7}
	m, err := NewManager(cfg, h.p, h.ids, h.mk, h.clock)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(testParts) {
		m.FinishLoad(p, h.coordEp, nil)
	}
	h.m = m
	return h
}

func wait[T any](t *testing.T, f *Future[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := f.Wait(ctx)
	if err != nil {
		t.Fatal("future never resolved")
	}
	return v
}

func (h *harness) init(id string, pid int64, epoch int16) InitProducerIDResult {
	h.t.Helper()
	return wait(h.t, h.m.InitProducerID(InitProducerIDRequest{TransactionalID: &id, TransactionTimeout: 10 * time.Second, ProducerID: pid, ProducerEpoch: epoch}))
}

func (h *harness) mustInit(id string) (int64, int16) {
	h.t.Helper()
	r := h.init(id, -1, -1)
	if r.Err != nil {
		h.t.Fatalf("init %s: %v", id, r.Err)
	}
	return r.ProducerID, r.ProducerEpoch
}

func (h *harness) add(id string, pid int64, epoch int16, tps ...TopicPartition) error {
	h.t.Helper()
	res := wait(h.t, h.m.AddPartitions(AddPartitionsRequest{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: tps}))
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool) error {
	h.t.Helper()
	return wait(h.t, h.m.EndTxn(EndTxnRequest{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: commit}))
}

func (h *harness) describe(id string) Description {
	h.t.Helper()
	d, err := h.m.Describe(id)
	if err != nil {
		h.t.Fatalf("describe %s: %v", id, err)
	}
	return d
}

// waitState polls (the Complete step runs on a goroutine) until id is in
// state s.
func (h *harness) waitState(id string, s State) Description {
	h.t.Helper()
	var d Description
	var err error
	if !testwait.Until(5*time.Second, func() bool {
		d, err = h.m.Describe(id)
		return err == nil && d.State == s
	}) {
		h.t.Fatalf("%s: state %v (err %v), want %v", id, d.State, err, s)
	}
	return d
}

// states decodes the records written for id, in order.
func (h *harness) states(id string) []State {
	h.t.Helper()
	var out []State
	for _, kv := range h.p.Records(h.m.Partition(id)) {
		k, err := DecodeKey(kv.Key)
		if err != nil || k != id {
			continue
		}
		if kv.Value == nil {
			out = append(out, Dead)
			continue
		}
		md, err := DecodeValue(kv.Value)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, md.State)
	}
	return out
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func is(err, target error) bool { return errors.Is(err, target) }
