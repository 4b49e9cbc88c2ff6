package group

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// fakeTopics is a Topics view tests change at will.
type fakeTopics struct {
	mu     sync.Mutex
	byName map[string]TopicInfo
}

func topicID(name string) TopicID {
	var id TopicID
	h := fnv.New128a()
	h.Write([]byte(name))
	copy(id[:], h.Sum(nil))
	return id
}

func newFakeTopics(parts map[string]int32) *fakeTopics {
	ft := &fakeTopics{byName: make(map[string]TopicInfo)}
	for n, p := range parts {
		ft.set(n, p)
	}
	return ft
}

func (ft *fakeTopics) set(name string, parts int32) {
	ft.mu.Lock()
	ft.byName[name] = TopicInfo{Name: name, ID: topicID(name), Partitions: parts}
	ft.mu.Unlock()
}

func (ft *fakeTopics) TopicByName(name string) (TopicInfo, bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	t, ok := ft.byName[name]
	return t, ok
}

func (ft *fakeTopics) TopicByID(id TopicID) (TopicInfo, bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, t := range ft.byName {
		if t.ID == id {
			return t, true
		}
	}
	return TopicInfo{}, false
}

func (ft *fakeTopics) AllTopics() []TopicInfo {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []TopicInfo
	for _, t := range ft.byName {
		out = append(out, t)
	}
	return out
}

// roundRobinAssignor is a test-only assignor: partition p of each topic
// goes to the (p mod n)-th subscribed member by id. It moves partitions
// on every membership change, which exercises revocation.
type roundRobinAssignor struct{ name string }

func (a roundRobinAssignor) Name() string { return a.name }

func (a roundRobinAssignor) Assign(spec *AssignSpec) map[string]Assignment {
	out := make(map[string]Assignment)
	subs := make(map[TopicID][]string)
	for _, m := range spec.Members {
		out[m.MemberID] = Assignment{}
		for _, id := range m.Subscribed {
			subs[id] = append(subs[id], m.MemberID)
		}
	}
	for id, ms := range subs {
		for p := range spec.Topics[id].Partitions {
			mid := ms[int(p)%len(ms)]
			out[mid][id] = append(out[mid][id], p)
		}
	}
	return out
}

func realEncodersReady() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	ConsumerGroupMetadataKV("probe", 1, false)
	return true
}

// testRecords encode records as "kind/group/member" keys and JSON values,
// enough to inspect what the machine wrote while the real encoders are
// not there.
var testRecords = consumerRecords{
	groupMeta: func(group string, epoch int32, tomb bool) statelog.KV {
		return testKV("group", group, "", epoch, tomb)
	},
	targetMeta: func(group string, epoch int32, tomb bool) statelog.KV {
		return testKV("target-meta", group, "", epoch, tomb)
	},
	member: func(group, id string, r *ConsumerMemberRecord) statelog.KV {
		return testKV("member", group, id, r, r == nil)
	},
	targetMember: func(group, id string, a Assignment, tomb bool) statelog.KV {
		return testKV("target", group, id, a, tomb)
	},
	current: func(group, id string, r *ConsumerAssignmentRecord) statelog.KV {
		return testKV("current", group, id, r, r == nil)
	},
}

// testPayloads keeps what each test record holds, by the id its value
// carries, so testLoad can replay the records as Load would.
var testPayloads sync.Map

var testPayloadSeq atomic.Int64

func testKV(kind, group, member string, v any, tomb bool) statelog.KV {
	kv := statelog.KV{Key: []byte(kind + "/" + group + "/" + member)}
	if !tomb {
		id := testPayloadSeq.Add(1)
		testPayloads.Store(id, v)
		kv.Value = strconv.AppendInt(nil, id, 10)
	}
	return kv
}

// testLoad replays test-encoded consumer records (last value per key wins,
// a tombstone deletes) into LoadedConsumerGroups, and returns the other
// records for Load.
func testLoad(t testing.TB, kvs []statelog.KV) (map[string]*LoadedConsumerGroup, []statelog.KV) {
	t.Helper()
	last := make(map[string]any)
	var order []string
	var rest []statelog.KV
	for _, kv := range kvs {
		k := string(kv.Key)
		kind, _, ok := strings.Cut(k, "/")
		if !ok || !slices.Contains([]string{"group", "target-meta", "member", "target", "current"}, kind) {
			rest = append(rest, kv)
			continue
		}
		if _, seen := last[k]; !seen {
			order = append(order, k)
		}
		if kv.Value == nil {
			last[k] = nil
			continue
		}
		id, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := testPayloads.Load(id)
		last[k] = v
	}
	out := make(map[string]*LoadedConsumerGroup)
	get := func(g string) *LoadedConsumerGroup {
		if out[g] == nil {
			out[g] = &LoadedConsumerGroup{Members: make(map[string]*LoadedConsumerMember), Target: make(map[string]Assignment)}
		}
		return out[g]
	}
	for _, k := range order {
		v := last[k]
		if v == nil {
			continue
		}
		parts := strings.SplitN(k, "/", 3)
		lc := get(parts[1])
		switch parts[0] {
		case "group":
			lc.GroupEpoch = v.(int32)
		case "target-meta":
			lc.AssignmentEpoch = v.(int32)
		case "target":
			lc.Target[parts[2]] = v.(Assignment)
		}
	}
	for _, k := range order {
		parts := strings.SplitN(k, "/", 3)
		if v := last[k]; v != nil && parts[0] == "member" {
			get(parts[1]).Members[parts[2]] = &LoadedConsumerMember{Metadata: *v.(*ConsumerMemberRecord)}
		}
	}
	for _, k := range order {
		parts := strings.SplitN(k, "/", 3)
		if v := last[k]; v != nil && parts[0] == "current" {
			if m := get(parts[1]).Members[parts[2]]; m != nil {
				m.Current = v.(*ConsumerAssignmentRecord)
			}
		}
	}
	return out, rest
}

// consumerHarness is a harness with a topic view, the real assignors and
// encoders when they exist and test ones otherwise.
type consumerHarness struct {
	*harness
	topics *fakeTopics
	real   bool // real record encoders
}

func newConsumerHarness(t testing.TB, mutate func(*Config)) *consumerHarness {
	h := &consumerHarness{harness: newHarness(t, mutate), topics: newFakeTopics(map[string]int32{"t": 6})}
	h.m.SetTopics(h.topics)
	if _, ok := NewAssignor("uniform"); !ok {
		h.m.assignorFor = func(name string) (Assignor, bool) {
			if name == "uniform" || name == "range" {
				return roundRobinAssignor{name}, true
			}
			return nil, false
		}
	}
	h.real = realEncodersReady()
	if !h.real {
		h.m.crec = testRecords
	}
	return h
}

func (h *consumerHarness) hb(req ConsumerHeartbeatRequest) ConsumerHeartbeatResponse {
	h.t.Helper()
	if req.Group == "" {
		req.Group = "g"
	}
	if req.Version == 0 {
		req.Version = 1
	}
	return wait(h.t, h.m.ConsumerHeartbeat(req))
}

// client plays a well-behaved consumer: it acks whatever it is given at
// once, owning exactly its last assignment.
type client struct {
	id       string
	instance *string
	epoch    int32
	owned    Assignment
	topics   []string
	regex    *string
}

func (h *consumerHarness) join(id string, topics ...string) *client {
	h.t.Helper()
	c := &client{id: id, topics: topics}
	if err := h.step(c); err != nil {
		h.t.Fatalf("join %s: %v", id, err)
	}
	return c
}

// step sends one heartbeat for c and applies the answer.
func (h *consumerHarness) step(c *client) error {
	h.t.Helper()
	req := ConsumerHeartbeatRequest{MemberID: c.id, MemberEpoch: c.epoch, InstanceID: c.instance, RebalanceTimeout: testRebalance,
		Owned: c.owned}
	if c.owned == nil || c.epoch == 0 {
		req.Owned = Assignment{}
	}
	if c.epoch == 0 {
		req.SubscribedTopicNames = c.topics
		if c.topics == nil {
			req.SubscribedTopicNames = []string{}
		}
		req.SubscribedTopicRegex = c.regex
	}
	r := h.hb(req)
	if r.Err != nil {
		return r.Err
	}
	if r.MemberID != c.id {
		h.t.Fatalf("member id %q, want %q", r.MemberID, c.id)
	}
	if r.HeartbeatInterval != h.m.cfg.ConsumerHeartbeatInterval {
		h.t.Fatalf("heartbeat interval %v", r.HeartbeatInterval)
	}
	c.epoch = r.MemberEpoch
	if r.HasAssignment {
		c.owned = normalize(r.Assignment)
	}
	h.checkInvariant("g")
	return nil
}

// converge heartbeats every client until nothing changes.
func (h *consumerHarness) converge(cs ...*client) {
	h.t.Helper()
	for range 20 {
		changed := false
		for _, c := range cs {
			e, o := c.epoch, c.owned
			if err := h.step(c); err != nil {
				h.t.Fatalf("%s: %v", c.id, err)
			}
			changed = changed || e != c.epoch || !equalAssignment(o, c.owned)
		}
		if !changed {
			return
		}
	}
	h.t.Fatal("group did not converge in 20 rounds")
}

// checkInvariant: no partition is in two members' assigned ∪ pending, and
// the owners index says exactly that.
func (h *consumerHarness) checkInvariant(group string) {
	h.t.Helper()
	g, err := h.m.lockGroup(group, false)
	if err != nil || g == nil {
		return
	}
	defer g.mu.Unlock()
	if g.consumer == nil {
		return
	}
	seen := make(map[tpKey]string)
	for _, mem := range g.consumer.members {
		for _, a := range []Assignment{mem.assigned, mem.pending} {
			a.each(func(k tpKey) {
				if o, ok := seen[k]; ok {
					h.t.Fatalf("partition %v held by %s and %s", k, o, mem.id)
				}
				seen[k] = mem.id
			})
		}
	}
	if len(seen) != len(g.consumer.owners) {
		h.t.Fatalf("owners index has %d entries, members hold %d", len(g.consumer.owners), len(seen))
	}
	for k, id := range seen {
		if g.consumer.owners[k] != id {
			h.t.Fatalf("owners index says %v is %s's, it is %s's", k, g.consumer.owners[k], id)
		}
	}
}

// exactlyOnce checks that every partition of topics is owned by exactly
// one of the clients.
func (h *consumerHarness) exactlyOnce(topics map[string]int32, cs ...*client) {
	h.t.Helper()
	count := make(map[tpKey]int)
	for _, c := range cs {
		c.owned.each(func(k tpKey) { count[k]++ })
	}
	want := 0
	for name, n := range topics {
		want += int(n)
		for p := range n {
			if c := count[tpKey{topicID(name), p}]; c != 1 {
				h.t.Fatalf("%s/%d owned by %d clients", name, p, c)
			}
		}
	}
	if len(count) != want {
		h.t.Fatalf("clients own %d partitions, want %d", len(count), want)
	}
}

func (h *consumerHarness) describe(group string) ConsumerGroupDescription {
	h.t.Helper()
	d := h.m.ConsumerDescribe([]string{group})[0]
	if d.Err != nil {
		h.t.Fatalf("describe %s: %v", group, d.Err)
	}
	return d
}

// keysWritten lists the test-encoder keys appended since from.
func (h *consumerHarness) keysWritten(from int) []string {
	var out []string
	for _, kv := range h.p.Records(h.m.Partition("g"))[from:] {
		s := string(kv.Key)
		if kv.Value == nil {
			s += " (tombstone)"
		}
		out = append(out, s)
	}
	return out
}

func (h *consumerHarness) nrec() int { return len(h.p.Records(h.m.Partition("g"))) }

func parts(a Assignment, topic string) []int32 {
	return slices.Clone(a[topicID(topic)])
}

func strp(s string) *string { return &s }
