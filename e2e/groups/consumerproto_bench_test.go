package groups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumerProtoBench measures, for BENCHMARKS.md, group rebalances of
// the classic protocol (eager range, cooperative-sticky) and of KIP-848
// (server-side uniform and range) side by side against one broker build:
// 10 members, 20 partitions, a light producer running. Per protocol:
//
//	(a) SIGKILL of a member (a child process): time until the other 9 own
//	    every partition (the session timeout, 6s, dominates);
//	(b) clean leave of a member: time until the other 9 own every partition;
//	(c) rolling restart of all 10 members, each in turn closed and replaced,
//	    the next only once all 20 partitions are owned again: per step, the
//	    partitions that stopped being consumed (revoked from their owner or
//	    owned by nobody at some instant) and the partition-seconds unowned.
//
// (a) and (b) run RINGLOG_GROUP848_BENCH_REPS times (default 3: median and
// range), (c) once (10 steps). Classic members heartbeat every 3s, the 848
// broker asks for 3s too; one more 848 row runs on a second broker asking
// for 1s. Benchmark only:
//
//	make build && RINGLOG_GROUP848_BENCH=1 RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$PWD/bin/ringlog \
//	  go test -count=1 -timeout 30m -run '^TestConsumerProtoBench$' -v ./cmd/ringlog
func TestConsumerProtoBench(t *testing.T) {
	harness.Processes(t) // a benchmark of broker processes
	if os.Getenv("RINGLOG_GROUP848_BENCH") != "1" {
		t.Skip("set RINGLOG_GROUP848_BENCH=1")
	}
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("RINGLOG_GROUP848_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	const hb = 3 * time.Second
	flags3 := consumerFlags(t, cpSession, hb)
	has848 := flags3 != nil
	b3 := harness.StartBroker(t, t.TempDir(), append(slices.Clone(groupBrokerArgs), flags3...)...)
	type row struct {
		label, proto string
		b            *harness.BrokerProc
		hb           time.Duration
	}
	rows := []row{
		{"classic eager range", protoClassicRange, b3, hb},
		{"classic cooperative-sticky", protoClassicCoop, b3, hb},
	}
	if has848 {
		b1 := harness.StartBroker(t, t.TempDir(), append(slices.Clone(groupBrokerArgs), consumerFlags(t, cpSession, time.Second)...)...)
		rows = append(rows,
			row{"848 uniform", proto848Uniform, b3, hb},
			row{"848 range", proto848Range, b3, hb},
			row{"848 uniform, heartbeat 1s", proto848Uniform, b1, time.Second})
	} else {
		t.Logf("broker without the consumer protocol: classic rows only")
	}
	var table strings.Builder
	fmt.Fprintf(&table, "`RINGLOG_GROUP848_BENCH=1 RINGLOG_GROUP848_BENCH_REPS=%d go test -run '^TestConsumerProtoBench$' ./cmd/ringlog` (10 members, 20 partitions, session timeout 6s; SIGKILL and leave: median [min-max] of %d; rolling restart: one run of 10 steps)\n\n", reps, reps)
	table.WriteString("| protocol | heartbeat | SIGKILL: 9 own all | leave: 9 own all | rolling restart: partitions stopped (sum / max per step) | unowned partition-s (sum / max per step) | rolling restart time (sum / max per step) |\n")
	table.WriteString("|---|---|---|---|---|---|---|\n")
	for i, r := range rows {
		t.Run(strings.ReplaceAll(r.label, " ", "_"), func(t *testing.T) {
			adm := kadm.NewClient(r.b.Client(t))
			topic := fmt.Sprintf("cpb-%d", i)
			harness.CreateTopic(t, adm, topic, 20, 1)
			prod := startCPProducer(t, []string{r.b.Addr}, topic, 250*time.Millisecond, 20, 1<<30, 30*time.Minute)
			defer prod.stop()
			var kills, leaves []time.Duration
			var steps []benchStep
			for rep := range reps {
				k, l, s := benchRound(t, r.b, r.proto, topic, fmt.Sprintf("cpb-%d-%d", i, rep), rep == 0)
				kills, leaves = append(kills, k), append(leaves, l)
				if rep == 0 {
					steps = s
				}
				t.Logf("%s rep %d: SIGKILL %v, leave %v", r.label, rep, k.Round(time.Millisecond), l.Round(time.Millisecond))
			}
			var stopped, maxStopped int
			var unowned, maxUnowned, dur, maxDur time.Duration
			for i, s := range steps {
				t.Logf("%s rolling step %d: %d partitions stopped %v, unowned %.2f partition-s, %v", r.label, i, len(s.stopped), s.stopped, s.unowned.Seconds(), s.dur.Round(time.Millisecond))
				stopped, maxStopped = stopped+len(s.stopped), max(maxStopped, len(s.stopped))
				unowned, maxUnowned = unowned+s.unowned, max(maxUnowned, s.unowned)
				dur, maxDur = dur+s.dur, max(maxDur, s.dur)
			}
			fmt.Fprintf(&table, "| %s | %v | %s | %s | %d / %d | %.1f / %.1f | %.1fs / %.1fs |\n", r.label, r.hb, medianRange(kills), medianRange(leaves),
				stopped, maxStopped, unowned.Seconds(), maxUnowned.Seconds(), dur.Seconds(), maxDur.Seconds())
		})
	}
	out := filepath.Join(t.TempDir(), "consumerproto_bench.md")
	os.WriteFile(out, []byte(table.String()), 0o644)
	t.Logf("rebalance benchmark, classic and KIP-848 side by side:\n%s", table.String())
	fmt.Println(table.String())
}

func medianRange(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs [%.2f-%.2f]", s[len(s)/2].Seconds(), s[0].Seconds(), s[len(s)-1].Seconds())
}

// ownTracker records when each in-process member started and stopped
// owning each partition.
type ownTracker struct {
	mu     sync.Mutex
	owners map[int32]map[string]bool
	events []ownEvent
}

type ownEvent struct {
	at     time.Time
	p      int32
	member string
	own    bool
}

func (o *ownTracker) set(member string, ps map[string][]int32, own bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for _, tps := range ps {
		for _, p := range tps {
			if o.owners[p] == nil {
				o.owners[p] = map[string]bool{}
			}
			if own {
				o.owners[p][member] = true
			} else {
				delete(o.owners[p], member)
			}
			o.events = append(o.events, ownEvent{now, p, member, own})
		}
	}
}

func (o *ownTracker) ownedBy(member string) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ps []int32
	for p, ms := range o.owners {
		if ms[member] {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// benchStep is one step of a rolling restart.
type benchStep struct {
	stopped []int32
	unowned time.Duration // partition-time owned by nobody
	dur     time.Duration
}

// window replays the events between from and to over n partitions.
func (o *ownTracker) window(from, to time.Time, n int) benchStep {
	o.mu.Lock()
	defer o.mu.Unlock()
	count := make([]int, n)
	i := 0
	for ; i < len(o.events) && o.events[i].at.Before(from); i++ {
		if e := o.events[i]; e.own {
			count[e.p]++
		} else {
			count[e.p]--
		}
	}
	since := make([]time.Time, n) // when p became unowned, if it is
	stopped := map[int32]bool{}
	var s benchStep
	for p := range n {
		if count[p] == 0 {
			since[p], stopped[int32(p)] = from, true
		}
	}
	for ; i < len(o.events) && !o.events[i].at.After(to); i++ {
		e := o.events[i]
		if e.own {
			if count[e.p] == 0 {
				s.unowned += e.at.Sub(since[e.p])
			}
			count[e.p]++
		} else {
			stopped[e.p] = true
			count[e.p]--
			if count[e.p] == 0 {
				since[e.p] = e.at
			}
		}
	}
	for p := range n {
		if count[p] == 0 {
			s.unowned += to.Sub(since[p])
		}
	}
	s.stopped = mapKeys(stopped)
	slices.Sort(s.stopped)
	s.dur = to.Sub(from)
	return s
}

// benchMember is an in-process member feeding an ownTracker.
type benchMember struct {
	name string
	cl   *kgo.Client
	done chan struct{}
}

func startBenchMember(t *testing.T, addr, name, group, topic, proto string, tr *ownTracker) *benchMember {
	t.Helper()
	m := &benchMember{name: name, done: make(chan struct{})}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.RebalanceTimeout(20 * time.Second), kgo.AutoCommitInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { tr.set(name, ps, true) }),
		// Consumption of a revoked partition stops when the revocation
		// starts; the member then commits it, as the default would.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			tr.set(name, ps, false)
			cl.CommitUncommittedOffsets(ctx)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { tr.set(name, ps, false) }),
	}, protoOpts(proto, cpSession, 3*time.Second)...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			if cl.PollFetches(context.Background()).IsClientClosed() {
				return
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *benchMember) close() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cl.Close()
	<-m.done
}

// benchRound runs one round on a fresh group: (a) SIGKILL, (b) leave and,
// when rolling is set, (c) the rolling restart.
func benchRound(t *testing.T, b *harness.BrokerProc, proto, topic, group string, rolling bool) (kill, leave time.Duration, steps []benchStep) {
	t.Helper()
	const n = 20
	tr := &ownTracker{owners: map[int32]map[string]bool{}}
	var ms []*benchMember
	seq := 0
	add := func() {
		ms = append(ms, startBenchMember(t, b.Addr, fmt.Sprintf("%s-m%d", group, seq), group, topic, proto, tr))
		seq++
	}
	for range 9 {
		add()
	}
	child := startCPMember(t, cpChildSpec{Addrs: []string{b.Addr}, Group: group, Topics: []string{topic}, Proto: proto,
		ClientID: group + "-child", Session: cpSession, Heartbeat: 3 * time.Second, Quiet: true})
	// balanced: the in-process members (and the child, when withChild)
	// own every partition once, each at least n/members.
	balanced := func(withChild bool) func() (bool, string) {
		return func() (bool, string) {
			seen := map[int32]int{}
			var desc []string
			owns := [][]int32{}
			for _, m := range ms {
				owns = append(owns, tr.ownedBy(m.name))
			}
			if withChild {
				owns = append(owns, child.owned())
			}
			ok := true
			for _, a := range owns {
				desc = append(desc, fmt.Sprint(a))
				ok = ok && len(a) >= n/len(owns)
				for _, p := range a {
					seen[p]++
				}
			}
			for p := range n {
				ok = ok && seen[int32(p)] == 1
			}
			return ok, strings.Join(desc, " ")
		}
	}
	harness.Eventually(t, 90*time.Second, "10 members balanced", balanced(true))
	if is848(proto) {
		if _, err := describe848(harness.Context(t, 10*time.Second), ms[0].cl, group); err != nil {
			t.Fatalf("%s: ConsumerGroupDescribe of %s: %v (did franz-go fall back to the classic protocol?)", proto, group, err)
		}
	}
	// Real time, here and before each measured event below: the second's
	// pause between events that the published numbers were taken with.
	time.Sleep(time.Second)
	child.kill()
	kill = harness.Eventually(t, 60*time.Second, "9 members own every partition after the SIGKILL", balanced(false))
	add()
	harness.Eventually(t, 60*time.Second, "10 members balanced again", balanced(false))
	time.Sleep(time.Second)
	start := time.Now()
	ms[0].close()
	ms = ms[1:]
	leave = time.Since(start) + harness.Eventually(t, 60*time.Second, "9 members own every partition after a leave", balanced(false))
	if !rolling {
		for _, m := range ms {
			m.close()
		}
		return kill, leave, nil
	}
	add()
	harness.Eventually(t, 60*time.Second, "10 members balanced before the rolling restart", balanced(false))
	time.Sleep(time.Second)
	for range 10 {
		from := time.Now()
		ms[0].close()
		ms = ms[1:]
		add()
		harness.Eventually(t, 90*time.Second, "10 members balanced in the rolling restart", balanced(false))
		steps = append(steps, tr.window(from, time.Now(), n))
	}
	for _, m := range ms {
		m.close()
	}
	return kill, leave, steps
}
