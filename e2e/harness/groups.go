package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Member is one franz-go group consumer that records its assignment, the
// first offset it received per partition and every offset it received.
type Member struct {
	cl    *kgo.Client
	Mu    sync.Mutex
	Owned map[int32]bool
	First map[int32]int64
	Seen  map[int32]map[int64]bool
	Count int
	Done  chan struct{}
}

// StartMember starts a member; opts come last, so they override the
// defaults (a shorter session timeout, say).
func StartMember(t *testing.T, addr, group, topic string, balancer kgo.GroupBalancer, opts ...kgo.Opt) *Member {
	t.Helper()
	m := &Member{Owned: map[int32]bool{}, First: map[int32]int64{}, Seen: map[int32]map[int64]bool{}, Done: make(chan struct{})}
	drop := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		m.Mu.Lock()
		for _, p := range ps[topic] {
			delete(m.Owned, p)
		}
		m.Mu.Unlock()
	}
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer), kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(10 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.Mu.Lock()
			for _, p := range ps[topic] {
				m.Owned[p] = true
			}
			m.Mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.Done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				m.Mu.Lock()
				if _, ok := m.First[r.Partition]; !ok {
					m.First[r.Partition] = r.Offset
				}
				if m.Seen[r.Partition] == nil {
					m.Seen[r.Partition] = map[int64]bool{}
				}
				m.Seen[r.Partition][r.Offset] = true
				m.Count++
				m.Mu.Unlock()
			})
		}
	}()
	return m
}

// Close leaves the group (committing what was consumed, franz-go's
// autocommit on revoke) and stops polling.
func (m *Member) Close() {
	m.cl.Close()
	<-m.Done
}

func (m *Member) Assigned() []int32 {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	var ps []int32
	for p := range m.Owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func CommittedOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx := Context(t, 20*time.Second)
	fo, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := fo.Error(); err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range fo[topic] {
		out[p] = o.At
	}
	return out
}

func ProduceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := Context(t, 30*time.Second)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
