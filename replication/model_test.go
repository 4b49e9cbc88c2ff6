package replication

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The model test runs one partition on three simulated brokers: in-memory
// logs, the real LeaderState, Follower and Purgatory, a fake controller
// with the coordinator's AlterPartition checks, fencing and ISR-only
// election, and a message network with delays and drops. Faults: crashes
// (unflushed data lost), restarts (a new incarnation is fenced first, so
// it never resumes leading its old epoch), isolation of a node from
// everything (it keeps running and may believe it still leads), random
// message loss and stale metadata. acks=all producers write unique values.
//
// Checked throughout: no two replicas ever expose different records below
// their high watermark; a leader's HW never moves down within an epoch;
// every acknowledgement had the record durable on >= min.insync replicas
// and a maximal ISR of >= min.insync. Checked after healing: the replicas
// converge, every acknowledged record is at its acknowledged offset, no
// value appears twice, and acknowledgement order is offset order.
//
// Waiting requests: a produce registers its purgatory waiter a
// few steps after its append, as netpath does once the local write is
// durable, so leadership may end or move in between; the controller also
// bumps the leader epoch of a leader that keeps leading. Every produce must
// be answered by its deadline with success, NOT_LEADER_OR_FOLLOWER,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or (its broker
// crashed) a closed connection, and a success must be for the record
// actually committed at its offset.

var debugModel = os.Getenv("RINGLOG_MODEL_DEBUG") != ""

const (
	simReplicas = 3
	simMinISR   = 2
	simStep     = 10 * time.Millisecond
)

var simTP = TopicPartition{Topic: "t", Partition: 0}

func simConfig() Config {
	c := DefaultConfig()
	c.ReplicaLagTimeMax = 300 * time.Millisecond // 30 steps
	c.FetchBackoff = 30 * time.Millisecond
	c.FetchMaxWait = 0
	c.AlterPartitionBackoff = 50 * time.Millisecond
	return c
}

type simController struct {
	rng      *rand.Rand
	state    PartitionState
	fenced   map[int32]bool
	lastBeat map[int32]int
}

func (c *simController) bump(leaderChanged bool) {
	if leaderChanged {
		c.state.LeaderEpoch++
	}
	c.state.PartitionEpoch++
}

// alter mirrors controller/metadata's alterPartition checks.
func (c *simController) alter(broker int32, p AlterProposal) (PartitionState, error) {
	s := &c.state
	switch {
	case p.LeaderEpoch < s.LeaderEpoch:
		return PartitionState{}, ErrFencedLeaderEpoch
	case p.LeaderEpoch > s.LeaderEpoch || p.PartitionEpoch != s.PartitionEpoch:
		return PartitionState{}, ErrInvalidUpdateVersion
	case s.Leader != broker:
		return PartitionState{}, ErrNotLeaderOrFollower
	case !slices.Contains(p.NewISR, broker):
		return PartitionState{}, errors.New("invalid request")
	}
	for _, r := range p.NewISR {
		if !slices.Contains(s.Replicas, r) || (!slices.Contains(s.ISR, r) && c.fenced[r]) {
			return PartitionState{}, ErrIneligibleReplica
		}
	}
	if !sameMembers(s.ISR, p.NewISR) {
		s.ISR = slices.Clone(p.NewISR)
		c.bump(false)
	}
	return s.Clone(), nil
}

func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// fence: the broker leaves ISRs that keep another member, and a partition
// it leads moves to the first unfenced ISR member or goes offline.
func (c *simController) fence(id int32) {
	if c.fenced[id] {
		return
	}
	c.fenced[id] = true
	s := &c.state
	changed := false
	if slices.Contains(s.ISR, id) && len(s.ISR) > 1 {
		s.ISR = without(s.ISR, id)
		changed = true
	}
	if s.Leader == id {
		// Any unfenced ISR member is a clean choice; picking at random
		// (Kafka prefers replica order) reaches more histories.
		var eligible []int32
		for _, r := range s.ISR {
			if !c.fenced[r] {
				eligible = append(eligible, r)
			}
		}
		s.Leader = -1
		if len(eligible) > 0 {
			s.Leader = eligible[c.rng.IntN(len(eligible))]
		}
		c.bump(true)
	} else if changed {
		c.bump(false)
	}
}

func (c *simController) unfence(id int32) {
	if !c.fenced[id] {
		return
	}
	c.fenced[id] = false
	if c.state.Leader == -1 && slices.Contains(c.state.ISR, id) {
		c.state.Leader = id
		c.bump(true)
	}
}

func without(s []int32, v int32) []int32 {
	return slices.DeleteFunc(slices.Clone(s), func(x int32) bool { return x == v })
}

type simNode struct {
	id       int32
	inc      int // incarnation: messages to an older one are dropped
	alive    bool
	isolated int // steps left cut off from everyone
	log      *memLog
	view     PartitionState
	leader   *LeaderState
	follower *Follower
	fetching bool
	purg     *Purgatory
	hwSeen   map[int32]int64 // leader epoch -> last HW, for monotonicity
	checked  int64           // committed-prefix check watermark
	// reportedISR/reportedMin: what the purgatory last heard (as
	// netpath's leaderPart keeps them).
	reportedISR, reportedMin int
}

type simMsg struct {
	due       int
	from, to  int32
	toInc     int
	fetchReq  *FetchRequest
	fetchRsp  *FetchResponse
	isResp    bool      // a fetch response (fetchRsp nil: the request failed)
	follower  *Follower // the state machine that sent the request
	alter     *AlterProposal
	alterResp bool
	alterRes  PartitionState
	alterErr  error
}

type simProduce struct {
	retry    bool // an idempotent retry answered with the first write's offset
	val      uint64
	off      int64
	node     int32
	inc      int   // the node's incarnation at the append
	epoch    int32 // the leader epoch the append was made under
	sent     int
	register int // step at which the waiter is added (local write done)
	waiter   *Waiter
}

// simTimeout is a produce's timeout_ms in steps.
const simTimeout = 50

type simAck struct {
	retry    bool
	val      uint64
	off      int64
	sent     int
	ackedAt  int
	ackOrder int
}

type sim struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	cfg     Config
	step    int
	now     time.Time
	ctrl    *simController
	nodes   []*simNode
	msgs    []simMsg
	pending []simProduce
	acked   []simAck
	nextVal uint64
	// committed is every record any replica ever exposed below its HW.
	committed map[int64]memEntry
	trace     []string
	faults    bool
	// Per-seed hostility, drawn in newSim.
	maxDelay int     // message delay is 0..maxDelay-1 steps
	metaP    float64 // chance per step that a node sees new metadata
	crashP   float64
	session  int     // steps without heartbeats before fencing
	fetchP   float64 // chance per step that an idle follower fetches
	readMax  int     // batches per fetch response
	quiet    bool    // no more produce requests
	dropP    float64
	bumpP    float64 // chance per step that the leader's epoch is bumped
	// registering are appended produces whose waiter is not added yet.
	registering []simProduce
	answers     map[string]int // answer kind -> count
}

func (s *sim) logf(format string, args ...any) {
	line := fmt.Sprintf("step %d: ", s.step) + fmt.Sprintf(format, args...)
	if len(s.trace) >= 300 && !debugModel {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, line)
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d step %d: %s\nrecent events:\n%s", s.seed, s.step, fmt.Sprintf(format, args...), strings.Join(s.trace, "\n"))
}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), cfg: simConfig(),
		now: time.Unix(1_700_000_000, 0), committed: map[int64]memEntry{}, faults: true, dropP: 0.03}
	s.maxDelay = []int{2, 3, 8}[s.rng.IntN(3)]
	s.metaP = []float64{0.05, 0.3, 0.8}[s.rng.IntN(3)]
	s.crashP = []float64{0.002, 0.004, 0.01}[s.rng.IntN(3)]
	s.session = []int{8, 25}[s.rng.IntN(2)]
	s.fetchP = []float64{0.3, 1}[s.rng.IntN(2)]
	s.readMax = 5
	s.bumpP = []float64{0, 0.002, 0.01}[s.rng.IntN(3)]
	s.answers = map[string]int{}
	s.ctrl = &simController{
		rng:      s.rng,
		state:    PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0},
		fenced:   map[int32]bool{},
		lastBeat: map[int32]int{},
	}
	for id := int32(1); id <= simReplicas; id++ {
		n := &simNode{id: id, alive: true, log: newMemLog(), purg: NewPurgatory(), hwSeen: map[int32]int64{}, view: PartitionState{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}}
		s.nodes = append(s.nodes, n)
		s.applyMetadata(n, s.ctrl.state.Clone())
	}
	return s
}

func (s *sim) node(id int32) *simNode { return s.nodes[id-1] }

func (s *sim) reachable(n *simNode) bool { return n.alive && n.isolated == 0 }

func (s *sim) send(m simMsg) {
	m.due = s.step + s.rng.IntN(s.maxDelay)
	if m.to > 0 {
		m.toInc = s.node(m.to).inc
	}
	s.msgs = append(s.msgs, m)
}

// applyMetadata is the broker's reaction to a metadata change.
func (s *sim) applyMetadata(n *simNode, p PartitionState) {
	if p.LeaderEpoch < n.view.LeaderEpoch || (p.LeaderEpoch == n.view.LeaderEpoch && p.PartitionEpoch <= n.view.PartitionEpoch) {
		return
	}
	n.view = p
	if n.leader != nil {
		u, err := n.leader.OnMetadata(p, s.now)
		if err == nil {
			s.applyUpdate(n, u)
			return
		}
		s.logf("node %d resigns epoch %d (%v)", n.id, n.leader.LeaderEpoch(), err)
		n.purg.FailPartition(simTP, n.leader.LeaderEpoch(), err)
		n.leader = nil
	}
	if p.Leader == n.id {
		n.follower, n.fetching = nil, false
		l, err := BecomeLeader(s.cfg, simTP, n.id, simMinISR, p, n.log, s.now)
		if err != nil {
			s.fail("become leader: %v", err)
		}
		n.leader = l
		n.reportedISR, n.reportedMin = l.MaximalISRSize(), l.MinInsync()
		n.purg.Lead(simTP, p.LeaderEpoch, l.HighWatermark(), n.reportedISR, n.reportedMin)
		s.logf("node %d leads epoch %d isr %v leo %d hw %d", n.id, p.LeaderEpoch, p.ISR, n.log.LogEndOffset(), l.HighWatermark())
		s.applyUpdate(n, l.OnLocalAppend())
		return
	}
	if p.Leader < 0 {
		n.follower, n.fetching = nil, false
		return
	}
	if n.follower == nil || n.follower.Leader() != p.Leader {
		n.follower, n.fetching = NewFollower(s.cfg, n.id, p.Leader), false
	}
	n.follower.AddPartition(simTP, p.LeaderEpoch, n.log)
}

// applyUpdate is the leader glue: HW to the log and the purgatory,
// proposals to the controller.
func (s *sim) applyUpdate(n *simNode, u Update) {
	l := n.leader
	if u.HWChanged {
		if last, ok := n.hwSeen[l.LeaderEpoch()]; ok && u.HW < last {
			s.fail("node %d epoch %d HW went down %d -> %d", n.id, l.LeaderEpoch(), last, u.HW)
		}
		n.hwSeen[l.LeaderEpoch()] = u.HW
		n.log.SetHighWatermark(u.HW)
	}
	// As netpath's apply: the purgatory hears every change of the HW or
	// the ISR counts (a waiter added below the HW is answered from them).
	if got := l.MaximalISRSize(); got != len(l.MaximalISR()) {
		s.fail("node %d: MaximalISRSize %d, MaximalISR %v", n.id, got, l.MaximalISR())
	}
	if isr, minISR := l.MaximalISRSize(), l.MinInsync(); u.HWChanged || isr != n.reportedISR || minISR != n.reportedMin {
		n.reportedISR, n.reportedMin = isr, minISR
		n.purg.Advance(simTP, l.LeaderEpoch(), l.HighWatermark(), isr, minISR)
	}
	s.collectAcks(n)
	if u.Proposal != nil {
		s.logf("node %d proposes isr %v (epochs %d/%d)", n.id, u.Proposal.NewISR, u.Proposal.LeaderEpoch, u.Proposal.PartitionEpoch)
		s.send(simMsg{from: n.id, to: 0, alter: u.Proposal})
	}
}

func (s *sim) collectAcks(n *simNode) {
	keep := s.pending[:0]
	for _, p := range s.pending {
		select {
		case <-p.waiter.Done():
		default:
			keep = append(keep, p)
			continue
		}
		if err := p.waiter.Err(); err != nil {
			s.logf("produce %d at %d on %d: %v", p.val, p.off, p.node, err)
			s.answer(p, err)
			continue
		}
		s.answer(p, nil)
		copies := 0
		for _, m := range s.nodes {
			if e, ok := m.log.entry(p.off); ok && e.val == p.val && p.off < m.log.durable {
				copies++
			}
		}
		if copies < simMinISR {
			s.fail("acked value %d at %d with %d durable copies", p.val, p.off, copies)
		}
		if l := s.node(p.node).leader; l == nil || len(l.MaximalISR()) < simMinISR {
			s.fail("acked value %d without a leader whose maximal ISR reaches min.insync", p.val)
		}
		if l := s.node(p.node).leader; l.LeaderEpoch() != p.epoch {
			// Even if the record is there, only its own epoch's HW may
			// answer it: another epoch's offsets are other records.
			s.fail("value %d appended in epoch %d acked in epoch %d", p.val, p.epoch, l.LeaderEpoch())
		}
		s.logf("ack %d at %d by %d", p.val, p.off, p.node)
		s.acked = append(s.acked, simAck{retry: p.retry, val: p.val, off: p.off, sent: p.sent, ackedAt: s.step, ackOrder: len(s.acked)})
	}
	s.pending = keep
}

func (s *sim) produce() {
	var target *simNode
	if s.ctrl.state.Leader > 0 && s.rng.Float64() < 0.8 {
		target = s.node(s.ctrl.state.Leader)
	} else {
		target = s.nodes[s.rng.IntN(simReplicas)]
	}
	if !s.reachable(target) || target.leader == nil {
		return
	}
	if err := target.leader.CheckProduce(-1); err != nil {
		return
	}
	if s.rng.Float64() < 0.1 && s.nextVal > 0 {
		// An idempotent producer's retry of an earlier value: if the
		// leader's log has it, deduplication answers with that offset,
		// maybe already below the HW, which may then never move.
		val := 1 + s.rng.Uint64N(s.nextVal)
		for off := target.log.start; off < target.log.LogEndOffset(); off++ {
			if e, _ := target.log.entry(off); e.val == val {
				s.registering = append(s.registering, simProduce{retry: true, val: val, off: off, node: target.id, inc: target.inc,
					epoch: target.leader.LeaderEpoch(), sent: s.step, register: s.step + s.rng.IntN(20)})
				s.registerDue()
				return
			}
		}
	}
	s.nextVal++
	off := target.log.appendLeader(s.nextVal)
	s.registering = append(s.registering, simProduce{val: s.nextVal, off: off, node: target.id, inc: target.inc,
		epoch: target.leader.LeaderEpoch(), sent: s.step, register: s.step + s.rng.IntN(20)})
	s.applyUpdate(target, target.leader.OnLocalAppend())
	s.registerDue()
}

// registerDue adds the waiters whose local write is done, whatever the
// node's role is by now (netpath's produce does not look either); the
// purgatory must answer them all.
func (s *sim) registerDue() {
	keep := s.registering[:0]
	for _, p := range s.registering {
		if p.register > s.step {
			keep = append(keep, p)
			continue
		}
		n := s.node(p.node)
		if !n.alive || n.inc != p.inc {
			s.answer(p, ErrClosed) // the connection died with the broker
			continue
		}
		p.waiter = n.purg.Add(simTP, p.epoch, p.off, s.now.Add(-simStep*time.Duration(s.step-p.sent)), s.now.Add(simStep*time.Duration(simTimeout-(s.step-p.sent))))
		s.pending = append(s.pending, p)
	}
	s.registering = keep
	for _, n := range s.nodes {
		s.collectAcks(n)
	}
}

// answer checks that a produce's answer is one Kafka allows and came by
// its deadline.
func (s *sim) answer(p simProduce, err error) {
	if s.step > p.sent+simTimeout {
		s.fail("produce %d (sent at step %d, timeout %d steps) answered at step %d: %v", p.val, p.sent, simTimeout, s.step, err)
	}
	kind := "ok"
	for _, k := range []struct {
		err  error
		name string
	}{{ErrNotLeaderOrFollower, "not_leader"}, {ErrNotEnoughReplicasAfterAppend, "after_append"}, {ErrRequestTimedOut, "timed_out"}, {ErrClosed, "closed"}} {
		if errors.Is(err, k.err) {
			kind = k.name
		}
	}
	if err != nil && kind == "ok" {
		s.fail("produce %d answered with %v, not a produce answer", p.val, err)
	}
	if n := s.node(p.node); kind == "timed_out" && n.alive && n.inc == p.inc && n.leader != nil &&
		n.leader.LeaderEpoch() == p.epoch && p.off < n.leader.HighWatermark() {
		// Its own leadership still holds and its HW covers it: the
		// purgatory missed the answer it had.
		s.fail("produce %d at offset %d timed out below the HW %d of its epoch %d", p.val, p.off, n.leader.HighWatermark(), p.epoch)
	}
	s.answers[kind]++
}

// checkAnswered fails if a produce is still unanswered after its timeout.
func (s *sim) checkAnswered() {
	for _, l := range [][]simProduce{s.registering, s.pending} {
		for _, p := range l {
			if s.step > p.sent+simTimeout {
				s.fail("produce %d on node %d (epoch %d, offset %d, sent at step %d) unanswered after its timeout", p.val, p.node, p.epoch, p.off, p.sent)
			}
		}
	}
}

func (s *sim) deliver(m simMsg) {
	dropped := s.rng.Float64() < s.dropP
	if m.alter != nil {
		s.deliverAlter(m, dropped)
		return
	}
	to := s.node(m.to)
	if !m.isResp {
		from := s.node(m.from)
		if dropped || !s.reachable(to) || !s.reachable(from) || to.inc != m.toInc {
			// The client times out.
			s.sendBack(m, nil)
			return
		}
		s.sendBack(m, s.serveFetch(to, m.fetchReq))
		return
	}
	// A fetch response (nil: the request failed).
	if !to.alive || to.inc != m.toInc || to.follower != m.follower {
		return
	}
	to.fetching = false
	if m.fetchRsp == nil || dropped || to.isolated > 0 {
		to.follower.OnRequestError(m.fetchReq, errors.New("timeout"), s.now)
		return
	}
	res := to.follower.HandleResponse(m.fetchReq, m.fetchRsp, s.now)
	if debugModel {
		s.logf("node %d handled %+v -> %+v leo %d cache %v", to.id, m.fetchRsp.Partitions, res, to.log.LogEndOffset(), to.log.cache.Entries())
	}
	if len(res.Truncated) > 0 {
		s.logf("node %d truncated to %d (latest epoch %d)", to.id, to.log.LogEndOffset(), to.log.LatestEpoch())
	}
}

func (s *sim) sendBack(req simMsg, rsp *FetchResponse) {
	s.send(simMsg{from: req.to, to: req.from, fetchReq: req.fetchReq, fetchRsp: rsp, isResp: true, follower: req.follower})
	s.msgs[len(s.msgs)-1].toInc = s.node(req.from).inc
}

func (s *sim) serveFetch(n *simNode, req *FetchRequest) *FetchResponse {
	resp := &FetchResponse{}
	for _, rp := range req.Partitions {
		r := FetchPartitionResponse{TopicPartition: rp.TopicPartition, HighWatermark: n.log.hw, LogStartOffset: n.log.start}
		if n.leader == nil {
			r.Err = ErrNotLeaderOrFollower
			resp.Partitions = append(resp.Partitions, r)
			continue
		}
		out, err := n.leader.OnFollowerFetch(FollowerFetch{ReplicaID: req.ReplicaID, CurrentLeaderEpoch: rp.CurrentLeaderEpoch, FetchOffset: rp.FetchOffset, LastFetchedEpoch: rp.LastFetchedEpoch}, s.now)
		switch {
		case err != nil:
			r.Err = err
		case out.Diverging != nil:
			r.DivergingEpoch = out.Diverging
			s.logf("node %d tells %d: diverging %+v (fetch %d last epoch %d)", n.id, req.ReplicaID, *out.Diverging, rp.FetchOffset, rp.LastFetchedEpoch)
		default:
			s.applyUpdate(n, out.Update)
			r.Records = n.log.read(rp.FetchOffset, 1+s.rng.IntN(s.readMax))
		}
		r.HighWatermark = n.leader.HighWatermark()
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp
}

func (s *sim) deliverAlter(m simMsg, dropped bool) {
	if !m.alterResp {
		from := s.node(m.from)
		var res PartitionState
		var err error
		if dropped || !s.reachable(from) {
			err = errors.New("request lost")
		} else {
			res, err = s.ctrl.alter(m.from, *m.alter)
			s.logf("controller: alter from %d isr %v: %v -> %+v", m.from, m.alter.NewISR, err, s.ctrl.state)
			if s.rng.Float64() < s.dropP {
				err, res = errors.New("response lost"), PartitionState{}
			}
		}
		s.send(simMsg{from: 0, to: m.from, alter: m.alter, alterResp: true, alterRes: res, alterErr: err})
		return
	}
	to := s.node(m.to)
	if !to.alive || to.inc != m.toInc || to.leader == nil {
		return
	}
	s.applyUpdate(to, to.leader.OnAlterResult(*m.alter, m.alterRes, m.alterErr, s.now))
}

func (s *sim) runStep() {
	s.step++
	s.now = s.now.Add(simStep)
	// Faults.
	if s.faults {
		for _, n := range s.nodes {
			switch {
			case n.alive && s.rng.Float64() < s.crashP:
				s.crash(n)
			case !n.alive && s.rng.Float64() < 0.03:
				s.restart(n)
			case n.alive && n.isolated == 0 && s.rng.Float64() < 0.003:
				n.isolated = 10 + s.rng.IntN(60)
				s.logf("node %d isolated for %d steps", n.id, n.isolated)
			}
		}
	}
	for _, n := range s.nodes {
		if n.isolated > 0 {
			n.isolated--
		}
	}
	// Controller: heartbeats, fencing, unfencing.
	for _, n := range s.nodes {
		if s.reachable(n) {
			s.ctrl.lastBeat[n.id] = s.step
			if s.ctrl.fenced[n.id] && n.view.PartitionEpoch == s.ctrl.state.PartitionEpoch && n.view.LeaderEpoch == s.ctrl.state.LeaderEpoch {
				s.ctrl.unfence(n.id)
				s.logf("controller: unfence %d -> %+v", n.id, s.ctrl.state)
			}
		} else if s.step-s.ctrl.lastBeat[n.id] > s.session && !s.ctrl.fenced[n.id] {
			s.ctrl.fence(n.id)
			s.logf("controller: fence %d -> %+v", n.id, s.ctrl.state)
		}
	}
	// A leader epoch bump with the same leader (Kafka bumps it on
	// reassignment): the old epoch's waiters must not be answered by the
	// new epoch's high watermark.
	if s.faults && s.ctrl.state.Leader > 0 && s.rng.Float64() < s.bumpP {
		s.ctrl.bump(true)
		s.logf("controller: epoch bump -> %+v", s.ctrl.state)
	}
	// Metadata propagation, possibly late.
	for _, n := range s.nodes {
		if s.reachable(n) && s.rng.Float64() < s.metaP {
			s.applyMetadata(n, s.ctrl.state.Clone())
		}
	}
	// Network.
	var due []simMsg
	rest := s.msgs[:0]
	for _, m := range s.msgs {
		if m.due <= s.step {
			due = append(due, m)
		} else {
			rest = append(rest, m)
		}
	}
	s.msgs = rest
	for _, m := range due {
		s.deliver(m)
	}
	// Producers.
	for range s.rng.IntN(3) {
		if !s.quiet {
			s.produce()
		}
	}
	// Local flushes, leader ticks, follower fetches, purgatory timeouts.
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		if s.rng.Float64() < 0.5 {
			n.log.flush()
			if n.leader != nil {
				s.applyUpdate(n, n.leader.OnLocalAppend())
			}
		}
		if n.leader != nil {
			s.applyUpdate(n, n.leader.Tick(s.now))
		}
		if n.follower != nil && !n.fetching && n.isolated == 0 && s.rng.Float64() < s.fetchP {
			if req := n.follower.BuildRequest(s.now); req != nil {
				n.fetching = true
				s.send(simMsg{from: n.id, to: n.follower.Leader(), fetchReq: req, follower: n.follower})
			}
		}
		if n.purg.Expire(s.now) > 0 {
			s.collectAcks(n)
		}
	}
	s.registerDue()
	s.checkAnswered()
	s.checkCommitted()
}

func (s *sim) crash(n *simNode) {
	s.logf("node %d crashes (leo %d durable %d)", n.id, n.log.LogEndOffset(), n.log.durable)
	n.alive = false
	n.purg.Close()
	s.collectAcks(n)
	n.log.crash()
	n.leader, n.follower, n.fetching, n.isolated = nil, nil, false, 0
}

// restart is a new process: a new incarnation, fenced by the controller
// before it may lead again, with whatever its log kept.
func (s *sim) restart(n *simNode) {
	n.alive = true
	n.inc++
	n.purg = NewPurgatory()
	n.view = PartitionState{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}
	n.checked = min(n.checked, n.log.hw)
	s.ctrl.fence(n.id)
	s.logf("node %d restarts with leo %d; controller %+v", n.id, n.log.LogEndOffset(), s.ctrl.state)
}

// checkCommitted: what any replica exposes below its HW is the one
// committed history.
func (s *sim) checkCommitted() {
	for _, n := range s.nodes {
		hi := min(n.log.hw, n.log.LogEndOffset())
		if n.checked > hi {
			n.checked = hi
		}
		for off := max(n.checked, n.log.start); off < hi; off++ {
			e, _ := n.log.entry(off)
			if c, ok := s.committed[off]; !ok {
				s.committed[off] = e
			} else if c != e {
				s.fail("node %d exposes %+v at offset %d, committed is %+v", n.id, e, off, c)
			}
		}
		n.checked = hi
	}
}

func (s *sim) heal() {
	s.faults = false
	s.dropP = 0
	// Healthy-cluster speeds, so lagging replicas catch up in bounded steps.
	s.fetchP, s.maxDelay, s.metaP, s.readMax = 1, 2, 0.5, 100
	for _, n := range s.nodes {
		n.isolated = 0
		if !n.alive {
			s.restart(n)
		}
	}
}

func (s *sim) converged() bool {
	if s.ctrl.state.Leader < 0 || len(s.ctrl.state.ISR) != simReplicas {
		return false
	}
	ld := s.node(s.ctrl.state.Leader)
	if ld.leader == nil || ld.leader.HighWatermark() != ld.log.LogEndOffset() {
		return false
	}
	for _, n := range s.nodes {
		if n.log.LogEndOffset() != ld.log.LogEndOffset() {
			return false
		}
	}
	return true
}

func (s *sim) finalCheck() {
	leaderID := s.ctrl.state.Leader
	if leaderID < 0 {
		s.fail("no leader after healing: %+v", s.ctrl.state)
	}
	if len(s.ctrl.state.ISR) != simReplicas {
		s.fail("ISR did not recover: %+v", s.ctrl.state)
	}
	ld := s.node(leaderID)
	if ld.leader == nil || ld.leader.HighWatermark() != ld.log.LogEndOffset() || len(s.pending)+len(s.registering) > 0 {
		s.fail("leader %d: leading %v, leo %d, hw %d, %d produce requests unanswered", leaderID, ld.leader != nil, ld.log.LogEndOffset(), ld.log.hw, len(s.pending)+len(s.registering))
	}
	for _, n := range s.nodes {
		if !slices.Equal(n.log.entries, ld.log.entries) || n.log.start != ld.log.start {
			s.fail("node %d log (%d entries) differs from leader %d (%d entries)", n.id, len(n.log.entries), leaderID, len(ld.log.entries))
		}
	}
	seen := map[uint64]int64{}
	for i, e := range ld.log.entries {
		off := ld.log.start + int64(i)
		if prev, dup := seen[e.val]; dup {
			s.fail("value %d at offsets %d and %d", e.val, prev, off)
		}
		seen[e.val] = off
	}
	for _, a := range s.acked {
		if off, ok := seen[a.val]; !ok || off != a.off {
			s.fail("acked value %d at offset %d lost (found at %d, %v)", a.val, a.off, off, ok)
		}
	}
	// Acknowledged before another was sent => lower offset.
	for _, a := range s.acked {
		for _, b := range s.acked {
			if !b.retry && a.ackedAt < b.sent && a.off >= b.off {
				s.fail("value %d acked at step %d has offset %d >= value %d sent at step %d with offset %d", a.val, a.ackedAt, a.off, b.val, b.sent, b.off)
			}
		}
	}
}

func runModel(t *testing.T, seed uint64, steps int) (acked int, leo int64) {
	s := newSim(t, seed)
	for range steps {
		s.runStep()
	}
	s.heal()
	for range 300 {
		s.runStep()
	}
	s.quiet = true
	for range 1000 {
		s.runStep()
		if s.converged() && len(s.pending)+len(s.registering) == 0 {
			break
		}
	}
	s.finalCheck()
	return len(s.acked), s.node(s.ctrl.state.Leader).log.LogEndOffset()
}

func TestModelNoAcknowledgedLoss(t *testing.T) {
	seeds, steps := 2000, 1500
	switch {
	case testing.Short():
		seeds = 50
	case raceEnabled:
		seeds = 250
	}
	if v := os.Getenv("RINGLOG_MODEL_SEEDS"); v != "" {
		// Longer soaks: RINGLOG_MODEL_SEEDS=100000.
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		seeds = n
	}
	first := uint64(0)
	if v := os.Getenv("RINGLOG_MODEL_SEED"); v != "" {
		// Replays one seed (with its trace on failure).
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		first, seeds = n, 1
	}
	// Each seed is its own simulation: shards of the seeds run side by
	// side, one per processor.
	shards := min(runtime.GOMAXPROCS(0), seeds)
	var acked atomic.Int64
	t.Run("seeds", func(t *testing.T) {
		for shard := range shards {
			t.Run(fmt.Sprint("shard", shard), func(t *testing.T) {
				t.Parallel()
				for seed := first + uint64(shard); seed < first+uint64(seeds); seed += uint64(shards) {
					a, _ := runModel(t, seed, steps)
					acked.Add(int64(a))
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	if totalAcked := int(acked.Load()); totalAcked < seeds*50 {
		t.Fatalf("only %d acknowledgements over %d seeds: the model is too hostile to test anything", totalAcked, seeds)
	}
	t.Logf("%d seeds, %d acknowledged records", seeds, acked.Load())
}
