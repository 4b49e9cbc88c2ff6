package group

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"
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

type harness struct {
	t     testing.TB
	m     *Manager
	p     *MemoryPersister
	clock *fakeClock
}

const (
	testSession   = 10 * time.Second
	testRebalance = 30 * time.Second
)

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 4
	cfg.InitialRebalanceDelay = 0
	if mutate != nil {
		mutate(&cfg)
	}
	h := &harness{t: t, p: NewMemoryPersister(), clock: &fakeClock{t: time.UnixMilli(1_700_000_000_000)}}
	m, err := NewManager(cfg, h.p, h.clock)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(cfg.OffsetsTopicPartitions) {
		m.FinishLoad(p, nil)
	}
	h.m = m
	return h
}

// tick advances the clock and fires deadlines.
func (h *harness) tick(d time.Duration) {
	h.m.Tick(h.clock.Advance(d))
}

// consumerMeta is a ConsumerProtocolSubscription v0: version, topics, and
// null user data.
func consumerMeta(topics ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = appendString(b, t)
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff)
}

func joinReq(group, memberID string, protos ...string) JoinRequest {
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	r := JoinRequest{
		Group: group, MemberID: memberID, ClientID: "client", ClientHost: "/127.0.0.1",
		SessionTimeout: testSession, RebalanceTimeout: testRebalance,
		ProtocolType: ConsumerProtocolType, RequireKnownMemberID: true,
	}
	for _, p := range protos {
		r.Protocols = append(r.Protocols, Protocol{Name: p, Metadata: consumerMeta("topic-a")})
	}
	return r
}

func wait[T any](t testing.TB, f *Future[T]) T {
	t.Helper()
	select {
	case <-f.Done():
		return f.Result()
	case <-time.After(5 * time.Second):
		t.Fatal("future did not resolve")
	}
	panic("unreachable")
}

// pending gives the goroutines that wait on (already durable) appends a
// chance to run, then reports whether the future is still unresolved.
func pending[T any](f *Future[T]) bool {
	select {
	case <-f.Done():
		return false
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

func mustErr(t testing.TB, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("got error %v, want %v", got, want)
	}
}

// newMemberIDRound does the KIP-394 first round and returns the id.
func (h *harness) newMemberID(group string) string {
	h.t.Helper()
	r := wait(h.t, h.m.Join(joinReq(group, "")))
	mustErr(h.t, r.Err, ErrMemberIDRequired)
	if r.MemberID == "" {
		h.t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	return r.MemberID
}

type stableGroup struct {
	gen     int32
	leader  string
	members []string // join order
}

// form takes n new members through join and sync to Stable and checks the
// answers along the way.
func (h *harness) form(group string, n int) stableGroup {
	h.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.newMemberID(group)
	}
	futs := make([]*Future[JoinResponse], n)
	for i, id := range ids {
		futs[i] = h.m.Join(joinReq(group, id))
		if i < n-1 && !pending(futs[i]) {
			h.t.Fatalf("join %d resolved before all members joined", i)
		}
	}
	return h.completeRebalance(group, futs)
}

// completeRebalance waits for the join answers, syncs everyone (followers
// first, so they must wait for the leader) and returns the new generation.
func (h *harness) completeRebalance(group string, futs []*Future[JoinResponse]) stableGroup {
	h.t.Helper()
	var sg stableGroup
	resps := make([]JoinResponse, len(futs))
	for i, f := range futs {
		resps[i] = wait(h.t, f)
		if resps[i].Err != nil {
			h.t.Fatalf("join %d: %v", i, resps[i].Err)
		}
		sg.members = append(sg.members, resps[i].MemberID)
	}
	sg.gen, sg.leader = resps[0].Generation, resps[0].Leader
	var leaderResp JoinResponse
	for _, r := range resps {
		if r.Generation != sg.gen || r.Leader != sg.leader || r.Protocol != "range" || r.ProtocolType != ConsumerProtocolType {
			h.t.Fatalf("inconsistent join responses: %+v vs gen %d leader %s", r, sg.gen, sg.leader)
		}
		if r.MemberID == sg.leader {
			leaderResp = r
		} else if len(r.Members) != 0 {
			h.t.Fatalf("follower %s got the member list", r.MemberID)
		}
	}
	if len(leaderResp.Members) != len(futs) {
		h.t.Fatalf("leader got %d members, want %d", len(leaderResp.Members), len(futs))
	}
	var syncs []*Future[SyncResponse]
	for _, id := range sg.members {
		if id != sg.leader {
			f := h.m.Sync(SyncRequest{Group: group, Generation: sg.gen, MemberID: id})
			if !pending(f) {
				h.t.Fatalf("follower sync resolved before the leader's: %+v", f.Result())
			}
			syncs = append(syncs, f)
		}
	}
	assign := make(map[string][]byte)
	for _, id := range sg.members {
		assign[id] = []byte("assignment-for-" + id)
	}
	syncs = append(syncs, h.m.Sync(SyncRequest{Group: group, Generation: sg.gen, MemberID: sg.leader, Assignments: assign}))
	for _, f := range syncs {
		r := wait(h.t, f)
		if r.Err != nil || r.Protocol != "range" || len(r.Assignment) == 0 {
			h.t.Fatalf("sync: %+v", r)
		}
	}
	return sg
}

func (h *harness) state(group string) string {
	return h.m.Describe([]string{group})[0].State
}

func (h *harness) heartbeat(group string, gen int32, id string) error {
	return h.m.Heartbeat(HeartbeatRequest{Group: group, Generation: gen, MemberID: id})
}

func (h *harness) commit(group string, gen int32, id string, topic string, part int32, off int64) error {
	r := wait(h.t, h.m.CommitOffsets(OffsetCommitRequest{Group: group, Generation: gen, MemberID: id,
		Offsets: []CommitOffset{{Topic: topic, Partition: part, Offset: off, LeaderEpoch: -1, Metadata: "m"}}}))
	return r.Partitions[0].Err
}

func (h *harness) fetch(group, topic string, part int32) int64 {
	h.t.Helper()
	fo, err := h.m.FetchOffsets(group, []TopicPartition{{topic, part}})
	if err != nil {
		h.t.Fatal(err)
	}
	return fo[0].Offset
}
