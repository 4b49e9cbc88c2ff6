package groups

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group protocols a member can speak. franz-go speaks KIP-848 only with
// kgo.ServerSideBalancer and a sticky ("uniform") or range balancer first,
// and silently falls back to the classic protocol when the broker does not
// advertise ConsumerGroupHeartbeat v1: tests of the 848 protocol therefore
// check the group's type through ConsumerGroupDescribe.
const (
	proto848Uniform   = "848-uniform"
	proto848Range     = "848-range"
	protoClassicRange = "classic-range"
	protoClassicCoop  = "classic-cooperative-sticky"
)

// cpClassicEnv, set to 1, runs the 848 tests with classic
// cooperative-sticky members and skips their 848-only checks: it exercises
// the harness against a broker without the consumer protocol.
const cpClassicEnv = "RINGLOG_CONSUMERPROTO_CLASSIC"

func cpClassicMode() bool { return os.Getenv(cpClassicEnv) == "1" }

// cpProto is the protocol the 848 tests' members speak: 848-uniform, or
// classic cooperative-sticky under cpClassicEnv.
func cpProto() string {
	if cpClassicMode() {
		return protoClassicCoop
	}
	return proto848Uniform
}

func is848(proto string) bool { return strings.HasPrefix(proto, "848-") }

// protoOpts are the franz-go options selecting proto. session and hb apply
// to classic members only: an 848 member takes both from the broker.
func protoOpts(proto string, session, hb time.Duration) []kgo.Opt {
	switch proto {
	case proto848Uniform:
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	case proto848Range:
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}
	case protoClassicRange:
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(session), kgo.HeartbeatInterval(hb)}
	case protoClassicCoop:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(session), kgo.HeartbeatInterval(hb)}
	}
	panic("unknown protocol " + proto)
}

// consumerFlags are the broker flags of the consumer protocol. A broker
// build without them (before the consumer group protocol) is accepted only under cpClassicEnv.
func consumerFlags(t *testing.T, session, hb time.Duration) []string {
	t.Helper()
	out, _ := exec.Command(harness.RinglogBin, "serve", "--help").CombinedOutput()
	if !strings.Contains(string(out), "group-consumer-session-timeout") {
		if cpClassicMode() {
			return nil
		}
		t.Fatalf("%s serve has no --group-consumer-session-timeout (set %s=1 to run the classic half)", harness.RinglogBin, cpClassicEnv)
	}
	return []string{"--group-consumer-session-timeout", session.String(), "--group-consumer-heartbeat-interval", hb.String()}
}

// cpChildSpec configures TestConsumerProtoChild (JSON in cpChildEnv).
type cpChildSpec struct {
	Addrs      []string
	Group      string
	Topics     []string
	Regex      bool
	Proto      string
	ClientID   string
	InstanceID string
	Session    time.Duration // classic members only
	Heartbeat  time.Duration // classic members only
	Quiet      bool          // do not log processed records (the benchmark)
}

const cpChildEnv = "RINGLOG_CONSUMERPROTO_CHILD"

// TestConsumerProtoChild is a group member run as a child process (so that
// a test can SIGKILL it). It processes a record by logging it, marks it,
// and commits marked offsets every 500ms and synchronously on revocation;
// kgo.BlockRebalanceOnPoll keeps a revocation from running while a polled
// batch is half processed, so a clean leave or move commits everything the
// member processed. SIGTERM closes the client (leaving the group) and
// exits. One line per event on stdout, each starting with the Unix time in
// nanoseconds:
//
//	T A p,p,..   partitions assigned (added)
//	T R p,p,..   partitions revoked
//	T L p,p,..   partitions lost (no commit)
//	T G p o      record at offset o of partition p processed
//	T C p o      commit of offset o (the next to read) of p succeeded
//	T X          closed, left the group
//
// (single topic per member in the log; the regex test reads topic names
// from Q lines: T Q topic p o).
func TestConsumerProtoChild(t *testing.T) {
	raw := os.Getenv(cpChildEnv)
	if raw == "" {
		t.Skip("child of the TestConsumerProto tests")
	}
	var s cpChildSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		line := strconv.FormatInt(time.Now().UnixNano(), 10) + " " + fmt.Sprintf(format, args...) + "\n"
		mu.Lock()
		os.Stdout.WriteString(line) // one write: a SIGKILL loses whole lines only
		mu.Unlock()
	}
	list := func(ps map[string][]int32) string {
		var all []string
		tps := mapKeys(ps)
		slices.Sort(tps)
		for _, tp := range tps {
			for _, p := range ps[tp] {
				all = append(all, strconv.Itoa(int(p)))
			}
		}
		if len(all) == 0 {
			return "-"
		}
		return strings.Join(all, ",")
	}
	event := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if kind == "R" {
				// Everything processed is marked (BlockRebalanceOnPoll):
				// commit it before the partitions go.
				if err := cl.CommitMarkedOffsets(ctx); err != nil {
					say("E commit on revoke: %v", err)
				}
			}
			say("%s %s", kind, list(ps))
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(s.Addrs...), kgo.ClientID(s.ClientID), kgo.ConsumerGroup(s.Group),
		kgo.ConsumeTopics(s.Topics...), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RebalanceTimeout(20 * time.Second),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(500 * time.Millisecond), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(event("A")), kgo.OnPartitionsRevoked(event("R")), kgo.OnPartitionsLost(event("L")),
		kgo.AutoCommitCallback(func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				say("E commit: %v", err)
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						say("E commit %s %d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					}
				}
			}
		}),
	}
	if s.Regex {
		// A classic regex consumer finds new topics in metadata refreshes
		// (the default every 5 minutes); an 848 member is told by the
		// coordinator.
		opts = append(opts, kgo.ConsumeRegex(), kgo.MetadataMinAge(500*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	}
	if s.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(s.InstanceID))
	}
	// The client's own log on stderr: the tests print it on failure.
	opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	opts = append(opts, protoOpts(s.Proto, s.Session, s.Heartbeat)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	// The commit callback sees offsets but not which of them succeeded at
	// which point; a marked-offset commit logs what it committed here.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	lastCommitted := map[string]map[int32]int64{}
	logCommitted := func() {
		for tp, ps := range cl.CommittedOffsets() {
			if lastCommitted[tp] == nil {
				lastCommitted[tp] = map[int32]int64{}
			}
			for p, o := range ps {
				if lastCommitted[tp][p] != o.Offset {
					lastCommitted[tp][p] = o.Offset
					say("C %d %d", p, o.Offset)
				}
			}
		}
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		select {
		case <-sig:
			memberID, _ := cl.GroupMetadata()
			cl.Close()
			if s.InstanceID != "" && is848(s.Proto) {
				if err := staticLeave848(s, memberID); err != nil {
					say("E static leave: %v", err)
				}
			}
			say("X")
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if !s.Quiet {
				if s.Regex {
					say("Q %s %d %d", r.Topic, r.Partition, r.Offset)
				} else {
					say("G %d %d", r.Partition, r.Offset)
				}
			}
			cl.MarkCommitRecords(r)
		})
		cl.AllowRebalance()
		logCommitted()
	}
	cl.Close()
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// cpEvent is one parsed line of a child's log.
type cpEvent struct {
	at    time.Time
	kind  byte // A R L G C X E Q
	parts []int32
	p     int32
	o     int64
	topic string
	text  string
}

// cpMember is a child member and what it has logged so far.
type cpMember struct {
	name   string
	proc   *clientProc
	mu     sync.Mutex
	parsed int // complete lines parsed
	events []cpEvent
	killed time.Time // when SIGKILLed; zero if not
}

func startCPMember(t *testing.T, s cpChildSpec) *cpMember {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	p := startClientProc(t, s.ClientID, []string{cpChildEnv + "=" + string(raw), "RINGLOG_TEST_BIN=" + harness.RinglogBin},
		os.Args[0], "-test.run", "^TestConsumerProtoChild$")
	return &cpMember{name: s.ClientID, proc: p}
}

// log parses the lines printed since the last call and returns all events.
func (m *cpMember) log() []cpEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	lines := m.proc.lines()
	for _, l := range lines[m.parsed:] {
		if e, ok := parseCPLine(l); ok {
			m.events = append(m.events, e)
		}
	}
	m.parsed = len(lines)
	return m.events
}

func parseCPLine(l string) (cpEvent, bool) {
	f := strings.Fields(l)
	if len(f) < 2 || len(f[1]) != 1 {
		return cpEvent{}, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return cpEvent{}, false
	}
	e := cpEvent{at: time.Unix(0, ns), kind: f[1][0], text: l}
	switch e.kind {
	case 'A', 'R', 'L':
		if len(f) < 3 {
			return cpEvent{}, false
		}
		for _, s := range strings.Split(f[2], ",") {
			if n, err := strconv.Atoi(s); err == nil { // "-": none
				e.parts = append(e.parts, int32(n))
			}
		}
	case 'G', 'C':
		if len(f) < 4 {
			return cpEvent{}, false
		}
		p, err1 := strconv.Atoi(f[2])
		o, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return cpEvent{}, false
		}
		e.p, e.o = int32(p), o
	case 'Q':
		if len(f) < 5 {
			return cpEvent{}, false
		}
		p, err1 := strconv.Atoi(f[3])
		o, err2 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil {
			return cpEvent{}, false
		}
		e.topic, e.p, e.o = f[2], int32(p), o
	}
	return e, true
}

// owned replays the member's assignment events: what it owns now.
func (m *cpMember) owned() []int32 {
	own := map[int32]bool{}
	for _, e := range m.log() {
		switch e.kind {
		case 'A':
			for _, p := range e.parts {
				own[p] = true
			}
		case 'R', 'L':
			for _, p := range e.parts {
				delete(own, p)
			}
		}
	}
	if !m.killed.IsZero() {
		return nil
	}
	ps := mapKeys(own)
	slices.Sort(ps)
	return ps
}

func (m *cpMember) kill() {
	m.proc.kill()
	m.killed = time.Now()
}

// stop SIGTERMs the member and waits for it to leave the group.
func (m *cpMember) stop(t *testing.T) {
	t.Helper()
	m.proc.stop(t)
	if evs := m.log(); len(evs) == 0 || evs[len(evs)-1].kind != 'X' {
		t.Fatalf("%s did not close cleanly\n%s", m.name, m.proc)
	}
}

// cpBalanced reports whether ms own each of n partitions exactly once,
// each member at least n/len(ms) of them, and describes the state.
func cpBalanced(ms []*cpMember, n int) (bool, string) {
	seen := map[int32]int{}
	ok := true
	var parts []string
	for _, m := range ms {
		a := m.owned()
		parts = append(parts, fmt.Sprintf("%s:%v", m.name, a))
		if len(a) < n/len(ms) {
			ok = false
		}
		for _, p := range a {
			seen[p]++
		}
	}
	for p := range n {
		if seen[int32(p)] != 1 {
			ok = false
		}
	}
	return ok, strings.Join(parts, " ")
}

// cpInterval is one member's ownership of one partition.
type cpInterval struct {
	member     string
	start, end time.Time
	endKind    byte // R revoked, L lost, K killed, O still owned at the end
	committed  int64
}

// cpReport is what cpCheck found.
type cpReport struct {
	processed, distinct int
	dupsKilled          int // re-processed after a SIGKILLed member's last commit
	dupsLost            int // re-processed after a member lost its partitions
	overlapsLost        int // ownership overlapping that of a member about to learn it lost the partition
	lostEvents          []string
}

// cpCheck checks the members' logs against the end offsets of a topic:
// every offset below its end processed; no partition owned by two members
// at once, except by one that then learned it had lost it (a zombie, which
// the protocol fences) or was SIGKILLed; and a record processed twice only
// where a member died or lost the partition before committing it.
func cpCheck(t *testing.T, ms []*cpMember, ends map[int32]int64) cpReport {
	t.Helper()
	var r cpReport
	type proc struct {
		member string
		at     time.Time
	}
	seen := map[int32]map[int64][]proc{}
	ivs := map[int32][]*cpInterval{}
	for _, m := range ms {
		open := map[int32]*cpInterval{}
		commits := map[int32]int64{}
		for _, e := range m.log() {
			switch e.kind {
			case 'A':
				for _, p := range e.parts {
					if open[p] != nil {
						t.Fatalf("%s: partition %d assigned twice without revocation: %s", m.name, p, e.text)
					}
					open[p] = &cpInterval{member: m.name, start: e.at, committed: -1}
				}
			case 'R', 'L':
				if e.kind == 'L' && len(e.parts) > 0 {
					r.lostEvents = append(r.lostEvents, m.name+": "+e.text)
				}
				for _, p := range e.parts {
					iv := open[p]
					if iv == nil {
						t.Fatalf("%s: partition %d revoked without being owned: %s", m.name, p, e.text)
					}
					iv.end, iv.endKind = e.at, e.kind
					iv.committed = commits[p]
					ivs[p] = append(ivs[p], iv)
					delete(open, p)
				}
			case 'G':
				if seen[e.p] == nil {
					seen[e.p] = map[int64][]proc{}
				}
				seen[e.p][e.o] = append(seen[e.p][e.o], proc{m.name, e.at})
				r.processed++
			case 'C':
				commits[e.p] = max(commits[e.p], e.o)
			}
		}
		for p, iv := range open {
			iv.end, iv.endKind, iv.committed = time.Now(), 'O', commits[p]
			if !m.killed.IsZero() {
				iv.end, iv.endKind = m.killed, 'K'
			}
			ivs[p] = append(ivs[p], iv)
		}
	}
	// intervalOf finds member's interval of p holding time at.
	intervalOf := func(p int32, member string, at time.Time) *cpInterval {
		for _, iv := range ivs[p] {
			if iv.member == member && !at.Before(iv.start) && !at.After(iv.end) {
				return iv
			}
		}
		return nil
	}
	for p, end := range ends {
		for o := range end {
			ps := seen[p][o]
			if len(ps) == 0 {
				t.Fatalf("partition %d offset %d (end %d) never processed", p, o, end)
			}
			r.distinct++
			slices.SortFunc(ps, func(a, b proc) int { return a.at.Compare(b.at) })
			for i := 1; i < len(ps); i++ {
				prev := intervalOf(p, ps[i-1].member, ps[i-1].at)
				switch {
				case prev == nil:
					t.Fatalf("partition %d offset %d processed by %s outside any ownership of it", p, o, ps[i-1].member)
				case prev.endKind == 'K' && o >= prev.committed:
					r.dupsKilled++
				case prev.endKind == 'L' && o >= prev.committed:
					r.dupsLost++
				default:
					t.Fatalf("partition %d offset %d processed twice: by %s at %v (ownership ended %c, committed %d) and by %s at %v\n%s",
						p, o, ps[i-1].member, ps[i-1].at.Format(time.StampMicro), prev.endKind, prev.committed, ps[i].member, ps[i].at.Format(time.StampMicro), cpPartitionLog(ms, p))
				}
			}
		}
		for o := range seen[p] {
			if o >= end {
				t.Fatalf("partition %d offset %d processed beyond the end %d", p, o, end)
			}
		}
	}
	for p, list := range ivs {
		for i, a := range list {
			for _, b := range list[i+1:] {
				if a.member == b.member || !a.start.Before(b.end) || !b.start.Before(a.end) {
					continue
				}
				if a.endKind == 'L' || b.endKind == 'L' || a.endKind == 'K' || b.endKind == 'K' {
					r.overlapsLost++
					continue
				}
				t.Fatalf("partition %d owned by %s (%v - %v, %c) and %s (%v - %v, %c) at once", p,
					a.member, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro), a.endKind,
					b.member, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro), b.endKind)
			}
		}
	}
	return r
}

// describe848 is ConsumerGroupDescribe of one group on its coordinator.
func describe848(ctx context.Context, cl *kgo.Client, group string) (*kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("ConsumerGroupDescribe answered %d groups", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, err
	}
	return &g, nil
}

// check848 asserts that group is a consumer-protocol group: ListGroups v5
// types it "consumer", and ConsumerGroupDescribe shows a group epoch and
// members members, each with a member epoch, under assignor. It returns
// member ids by client id.
func check848(t *testing.T, cl *kgo.Client, group, assignor string, members int) map[string]string {
	t.Helper()
	var ids map[string]string
	harness.Eventually(t, 20*time.Second, "ConsumerGroupDescribe shows the 848 group", func() (bool, string) {
		g, err := describe848(harness.Context(t, 10*time.Second), cl, group)
		if err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("state %s epoch %d assignor %s, %d members", g.State, g.Epoch, g.AssignorName, len(g.Members))
		if g.Epoch <= 0 || g.AssignorName != assignor || len(g.Members) != members {
			return false, state
		}
		ids = map[string]string{}
		for _, m := range g.Members {
			if m.MemberEpoch <= 0 {
				return false, state + fmt.Sprintf("; member %s epoch %d", m.ClientID, m.MemberEpoch)
			}
			ids[m.ClientID] = m.MemberID
		}
		return true, state
	})
	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"consumer"}
	resp, err := lg.RequestWith(harness.Context(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	found := false
	for _, g := range resp.Groups {
		found = found || (g.Group == group && g.GroupType == "consumer")
	}
	if !found {
		t.Fatalf("ListGroups v%d with types [consumer] lacks %s: %+v", lg.Version, group, resp.Groups)
	}
	return ids
}

// cpProducer produces keyed records to topic until stopped (at most limit
// records or dur), acks=all; failed produces are counted, not fatal: the
// checks use the end offsets, not the produced count.
type cpProducer struct {
	stopc chan struct{}
	done  chan struct{}
	ok    int
	fails int
	last  error
}

func startCPProducer(t *testing.T, addrs []string, topic string, every time.Duration, perTick, limit int, dur time.Duration) *cpProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	p := &cpProducer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		tick := time.NewTicker(every)
		defer tick.Stop()
		deadline := time.Now().Add(dur)
		for i := 0; i < limit && time.Now().Before(deadline); {
			select {
			case <-p.stopc:
				return
			case <-tick.C:
			}
			var rs []*kgo.Record
			for range perTick {
				rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
				i++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			for _, r := range cl.ProduceSync(ctx, rs...) {
				if r.Err != nil {
					p.fails++
					p.last = r.Err
				} else {
					p.ok++
				}
			}
			cancel()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *cpProducer) stop() {
	select {
	case <-p.stopc:
	default:
		close(p.stopc)
	}
	<-p.done
}

// waitCommitted waits until group's committed offsets of topic are ends.
func waitCommitted(t *testing.T, adm *kadm.Client, group, topic string, ends map[int32]int64) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "the group commits the end offsets", func() (bool, string) {
		fo, err := adm.FetchOffsets(harness.Context(t, 10*time.Second), group)
		if err != nil || fo.Error() != nil {
			return false, fmt.Sprint(err, fo.Error())
		}
		got := map[int32]int64{}
		for p, o := range fo[topic] {
			got[p] = o.At
		}
		return fmt.Sprint(got) == fmt.Sprint(ends), fmt.Sprintf("committed %v, ends %v", got, ends)
	})
}

// cpOwnershipHooks keep (*mp).owned up to date; they wait for ready, closed
// once *mp is set (they are options of the client *mp is created with); a
// revocation commits what was polled first (setting OnPartitionsRevoked
// replaces franz-go's default commit on revoke).
func cpOwnershipHooks(mp **harness.Member, ready <-chan struct{}) []kgo.Opt {
	set := func(own, commit bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if commit {
				cl.CommitUncommittedOffsets(ctx)
			}
			<-ready
			m := *mp
			m.Mu.Lock()
			defer m.Mu.Unlock()
			for _, tps := range ps {
				for _, p := range tps {
					if own {
						m.Owned[p] = true
					} else {
						delete(m.Owned, p)
					}
				}
			}
		}
	}
	return []kgo.Opt{kgo.OnPartitionsAssigned(set(true, false)), kgo.OnPartitionsRevoked(set(false, true)), kgo.OnPartitionsLost(set(false, false))}
}

// cpAssignLog lists the members' assignment events in time order, for
// failure messages.
func cpAssignLog(ms []*cpMember) string {
	type line struct {
		at   time.Time
		text string
	}
	var ls []line
	for i, m := range ms {
		for _, e := range m.log() {
			if strings.ContainsRune("ARLXE", rune(e.kind)) {
				ls = append(ls, line{e.at, fmt.Sprintf("%s %s#%d %s", e.at.Format("15:04:05.000"), m.name, i, e.text[strings.IndexByte(e.text, ' ')+1:])})
			}
		}
	}
	slices.SortFunc(ls, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

// staticLeave848 sends the static member's temporary leave (member epoch
// -2) with its instance id. franz-go 1.22.3 sends that leave without the
// instance id, which Kafka (and ringlog) refuse with INVALID_REQUEST, so
// the member would hold its instance id until its session expired and a
// restart within the session timeout would get UNRELEASED_INSTANCE_ID; the
// Java client sends the id, as this does.
func staticLeave848(s cpChildSpec, memberID string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = s.Group, memberID, -2, &s.InstanceID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// cpPartitionLog lists the members' events touching partition p in time
// order (runs of processed records condensed), for failure messages.
func cpPartitionLog(ms []*cpMember, p int32) string {
	type line struct {
		at   time.Time
		text string
	}
	var ls []line
	for _, m := range ms {
		var run []cpEvent // consecutive G events of p
		flush := func() {
			if len(run) > 0 {
				ls = append(ls, line{run[0].at, fmt.Sprintf("%s %s G %d..%d (%d records, until %s)", run[0].at.Format("15:04:05.000000"), m.name,
					run[0].o, run[len(run)-1].o, len(run), run[len(run)-1].at.Format("15:04:05.000000"))})
				run = nil
			}
		}
		for _, e := range m.log() {
			switch {
			case e.kind == 'G' && e.p == p:
				run = append(run, e)
			case e.kind == 'C' && e.p == p, slices.Contains(e.parts, p), e.kind == 'X', e.kind == 'E':
				flush()
				ls = append(ls, line{e.at, e.at.Format("15:04:05.000000") + " " + m.name + " " + e.text[strings.IndexByte(e.text, ' ')+1:]})
			}
		}
		flush()
		if !m.killed.IsZero() {
			ls = append(ls, line{m.killed, m.killed.Format("15:04:05.000000") + " " + m.name + " SIGKILLed"})
		}
	}
	slices.SortFunc(ls, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

// cpSaveLogs writes the members' and brokers' output to RINGLOG_TEST_LOGDIR
// (when set) if t fails.
func cpSaveLogs(t *testing.T, ms func() []*cpMember, bs func() []*harness.BrokerProc) {
	dir := os.Getenv("RINGLOG_TEST_LOGDIR")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, m := range ms() {
			os.WriteFile(filepath.Join(dir, t.Name()+"-"+m.name+".out"), []byte(m.proc.out.String()), 0o644)
			os.WriteFile(filepath.Join(dir, t.Name()+"-"+m.name+".err"), []byte(m.proc.errb.String()), 0o644)
		}
		for i, b := range bs() {
			if b.Out != nil {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-node%d.log", t.Name(), i+1)), []byte(b.Out.String()), 0o644)
			}
		}
	})
}
