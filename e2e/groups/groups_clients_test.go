package groups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
)

// clientProc is a client process (kcat, python, a child test binary)
// whose output the test reads while it runs.
type clientProc struct {
	name   string
	cmd    *exec.Cmd
	out    *harness.SyncBuffer
	errb   *harness.SyncBuffer
	exited chan struct{}
}

func startClientProc(t *testing.T, name string, env []string, bin string, args ...string) *clientProc {
	t.Helper()
	p := &clientProc{name: name, cmd: exec.Command(bin, args...), out: &harness.SyncBuffer{}, errb: &harness.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errb
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	// Clients must not outlive a test binary that dies.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *clientProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM (kcat then leaves its group, committing) and waits.
func (p *clientProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s ignored SIGTERM for 15s\n%s", p.name, p)
	}
}

// lines returns the complete lines printed so far.
func (p *clientProc) lines() []string {
	ls := strings.Split(p.out.String(), "\n")
	return ls[:len(ls)-1]
}

func (p *clientProc) String() string {
	tail := func(s string) string {
		if len(s) > 3000 {
			return "..." + s[len(s)-3000:]
		}
		return s
	}
	return fmt.Sprintf("[%s stdout]\n%s\n[%s stderr]\n%s", p.name, tail(p.out.String()), p.name, tail(p.errb.String()))
}

// groupAssignment returns, while group is Stable, each member's partitions
// of topic keyed by client id (the tests give each member its own).
func groupAssignment(t *testing.T, adm *kadm.Client, group, topic string) (map[string][]int32, string) {
	t.Helper()
	dg, err := adm.DescribeGroups(harness.Context(t, 10*time.Second), group)
	if err != nil {
		return nil, err.Error()
	}
	g := dg[group]
	if g.Err != nil {
		return nil, g.Err.Error()
	}
	if g.State != "Stable" {
		return nil, "group " + g.State
	}
	out := map[string][]int32{}
	for _, m := range g.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, "member " + m.ClientID + " without a consumer assignment"
		}
		var ps []int32
		for _, tp := range c.Topics {
			if tp.Topic == topic {
				ps = append(ps, tp.Partitions...)
			}
		}
		slices.Sort(ps)
		out[m.ClientID] = ps
	}
	return out, fmt.Sprint(out)
}

// splitOver reports whether asg gives each of members members a non-empty
// share and every one of n partitions to exactly one of them.
func splitOver(asg map[string][]int32, members, n int) bool {
	if len(asg) != members {
		return false
	}
	seen := map[int32]bool{}
	for _, ps := range asg {
		if len(ps) == 0 {
			return false
		}
		for _, p := range ps {
			if seen[p] || p < 0 || int(p) >= n {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == n
}

// TestGroupsKcatBalanced: three `kcat -G` processes (librdkafka's balanced
// consumer, roundrobin and range) split a 6-partition topic; every record
// is read, each process reads only the partitions DescribeGroups shows it
// owning, the group commits the end, and after all three leave a new kcat
// resumes exactly at the committed offsets.
func TestGroupsKcatBalanced(t *testing.T) {
	t.Parallel()
	harness.NeedTool(t, "/usr/bin/kcat")
	b := harness.StartBroker(t, t.TempDir(), groupBrokerArgs...)
	for _, strategy := range []string{"roundrobin", "range"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			const parts, procs = 6, 3
			topic, group := "kcat-bal-"+strategy, "kcat-bal-"+strategy
			cl := b.Client(t)
			adm := kadm.NewClient(cl)
			harness.CreateTopic(t, adm, topic, parts, 1)
			kcat := func(id string) *clientProc {
				// -e is not valid with -G: the processes are stopped by
				// signal. -u: unbuffered, the test reads as kcat prints.
				// No -o: kcat's -o overrides the committed offset at every
				// assignment, and resuming from commits is what is tested;
				// auto.offset.reset covers the group's first start.
				return startClientProc(t, id, nil, "/usr/bin/kcat", "-b", b.Addr, "-G", group, topic,
					"-q", "-u", "-f", "%p %o\n",
					"-X", "client.id="+id, "-X", "partition.assignment.strategy="+strategy,
					"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
					"-X", "topic.auto.offset.reset=earliest")
			}
			// read parses "partition offset" lines.
			read := func(p *clientProc) map[int32]map[int64]int {
				out := map[int32]map[int64]int{}
				for _, l := range p.lines() {
					var part int32
					var off int64
					if _, err := fmt.Sscanf(l, "%d %d", &part, &off); err != nil {
						t.Fatalf("%s printed %q\n%s", p.name, l, p)
					}
					if out[part] == nil {
						out[part] = map[int64]int{}
					}
					out[part][off]++
				}
				return out
			}
			var ks []*clientProc
			for i := range procs {
				ks = append(ks, kcat(fmt.Sprintf("kcat-%d", i)))
			}
			var asg map[string][]int32
			d := harness.Eventually(t, 30*time.Second, "3 kcat processes split the partitions", func() (bool, string) {
				var state string
				asg, state = groupAssignment(t, adm, group, topic)
				return splitOver(asg, procs, parts), state
			})
			t.Logf("%d kcat processes balanced in %v: %v", procs, d.Round(time.Millisecond), asg)
			// Records come after the split, so each process reads only
			// what DescribeGroups says it owns.
			harness.ProduceN(t, cl, topic, 600)
			ends := harness.EndOffsets(t, adm, topic)
			harness.Eventually(t, 30*time.Second, "every record read by some kcat", func() (bool, string) {
				missing := 0
				var got []map[int32]map[int64]int
				for _, k := range ks {
					got = append(got, read(k))
				}
				for p, end := range ends {
					for o := range end {
						if !slices.ContainsFunc(got, func(g map[int32]map[int64]int) bool { return g[p][o] > 0 }) {
							missing++
						}
					}
				}
				return missing == 0, fmt.Sprintf("%d records missing", missing)
			})
			printers := 0
			for _, k := range ks {
				got := read(k)
				if len(got) > 0 {
					printers++
				}
				for p := range got {
					if !slices.Contains(asg[k.name], p) {
						t.Fatalf("%s read partition %d, assigned %v (group %v)", k.name, p, asg[k.name], asg)
					}
				}
			}
			if printers != procs {
				t.Fatalf("only %d of %d kcat processes read records", printers, procs)
			}
			// kcat commits what it printed when it leaves (SIGTERM): its
			// auto-commit timer runs every 5s whatever
			// auto.commit.interval.ms says, too slow to wait for here.
			for _, k := range ks {
				k.stop(t)
			}
			if c := harness.CommittedOffsets(t, adm, group, topic); fmt.Sprint(c) != fmt.Sprint(ends) {
				t.Fatalf("after the kcat processes left: committed %v, ends %v", c, ends)
			}
			// Restart: one kcat reads exactly what came after the commits.
			harness.ProduceN(t, cl, topic, 60)
			ends2 := harness.EndOffsets(t, adm, topic)
			k := kcat("kcat-restarted")
			harness.Eventually(t, 30*time.Second, "restarted kcat reads the new records", func() (bool, string) {
				got := read(k)
				for p, end := range ends2 {
					for o := ends[p]; o < end; o++ {
						if got[p][o] == 0 {
							return false, fmt.Sprintf("partition %d offset %d not read", p, o)
						}
					}
				}
				return true, ""
			})
			for p, offs := range read(k) {
				for o, n := range offs {
					if o < ends[p] || n != 1 {
						t.Fatalf("restarted kcat read partition %d offset %d %d times (committed %d)\n%s", p, o, n, ends[p], k)
					}
				}
			}
			k.stop(t)
			if c := harness.CommittedOffsets(t, adm, group, topic); fmt.Sprint(c) != fmt.Sprint(ends2) {
				t.Fatalf("after the restarted kcat left: committed %v, ends %v", c, ends2)
			}
		})
	}
}

// pyLog is what one confluent_group_member.py process printed.
type pyLog struct {
	owned  map[int32]bool
	got    map[int32][]int64 // offsets received, in order
	ok     map[int32][]int64 // offsets whose commit succeeded
	failed map[int32]map[int64]bool
	since  map[int32]int // index in got[p] where the latest ownership of p began
	errs   []string
}

func parsePy(lines []string) *pyLog {
	l := &pyLog{owned: map[int32]bool{}, got: map[int32][]int64{}, ok: map[int32][]int64{}, failed: map[int32]map[int64]bool{}, since: map[int32]int{}}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var ps []int32
		if len(f) > 1 && (f[0] == "ASSIGN" || f[0] == "REVOKE" || f[0] == "LOST") {
			for _, s := range strings.Split(f[1], ",") {
				if n, err := strconv.Atoi(s); err == nil { // "-": none
					ps = append(ps, int32(n))
				}
			}
		}
		var p int32
		var o int64
		if len(f) >= 3 && (f[0] == "GOT" || f[0] == "OK" || f[0] == "FAIL") {
			n, _ := strconv.Atoi(f[1])
			p = int32(n)
			o, _ = strconv.ParseInt(f[2], 10, 64)
		}
		switch f[0] {
		case "ASSIGN":
			for _, p := range ps {
				l.owned[p] = true
				l.since[p] = len(l.got[p])
			}
		case "REVOKE", "LOST":
			for _, p := range ps {
				delete(l.owned, p)
			}
		case "GOT":
			l.got[p] = append(l.got[p], o)
		case "OK":
			l.ok[p] = append(l.ok[p], o)
		case "FAIL":
			if l.failed[p] == nil {
				l.failed[p] = map[int64]bool{}
			}
			l.failed[p][o] = true
		default:
			l.errs = append(l.errs, line)
		}
	}
	return l
}

func (l *pyLog) ownedList() []int32 {
	var ps []int32
	for p := range l.owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// TestGroupsConfluentCrashTakeover: two confluent_kafka consumers
// (roundrobin, cooperative-sticky) in one group commit every record
// synchronously while records keep arriving; one is killed with SIGKILL
// mid-run. After its session times out the survivor owns every partition,
// starts each of the dead one's exactly at the committed offset, and
// between them the two read every record, twice only where a commit was
// not confirmed.
func TestGroupsConfluentCrashTakeover(t *testing.T) {
	t.Parallel()
	harness.NeedConfluentKafka(t)
	b := harness.StartBroker(t, t.TempDir(), groupBrokerArgs...)
	for _, strategy := range []string{"roundrobin", "cooperative-sticky"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			const parts = 4
			const session = 6 * time.Second // the script's session.timeout.ms
			topic, group := "py-crash-"+strategy, "py-crash-"+strategy
			cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			adm := kadm.NewClient(cl)
			harness.CreateTopic(t, adm, topic, parts, 1)

			// Records keep arriving the whole time, one per partition
			// every 50ms, so the kill lands mid-run; produced[p] is p's
			// end offset.
			var mu sync.Mutex
			produced := map[int32]int64{}
			stop, prodErr := make(chan struct{}), make(chan error, 1)
			go func() {
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						prodErr <- nil
						return
					case <-tick.C:
					}
					var rs []*kgo.Record
					for p := range int32(parts) {
						rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")})
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := cl.ProduceSync(ctx, rs...).FirstErr()
					cancel()
					if err != nil {
						prodErr <- err
						return
					}
					mu.Lock()
					for p := range int32(parts) {
						produced[p]++
					}
					mu.Unlock()
				}
			}()
			stopProducing := func() map[int32]int64 {
				close(stop)
				if err := <-prodErr; err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				return maps(produced)
			}
			defer func() {
				select {
				case <-stop:
				default:
					stopProducing()
				}
			}()

			py := func(name string) *clientProc {
				return startClientProc(t, name, nil, "/usr/bin/python3", "testdata/confluent_group_member.py", b.Addr, topic, group, strategy)
			}
			victim, survivor := py("victim"), py("survivor")
			both := func() string { return victim.String() + "\n" + survivor.String() }
			harness.Eventually(t, 30*time.Second, "both consumers own and commit partitions", func() (bool, string) {
				v, s := parsePy(victim.lines()), parsePy(survivor.lines())
				asg := map[string][]int32{"victim": v.ownedList(), "survivor": s.ownedList()}
				state := fmt.Sprint(asg)
				if !splitOver(asg, 2, parts) {
					return false, state
				}
				// Some records and commits on every partition, so the
				// kill comes mid-run, not right after the assignment.
				for _, l := range []*pyLog{v, s} {
					for p := range l.owned {
						if n := len(l.got[p]) - l.since[p]; n < 10 || len(l.ok[p]) == 0 {
							return false, fmt.Sprintf("%s: %d records on partition %d since its assignment", state, n, p)
						}
					}
				}
				return true, state
			})
			vParts := parsePy(victim.lines()).ownedList()
			victim.kill()
			killed := time.Now()
			// The dead member's commits are final once the broker has seen
			// its connection close and answered what it had sent, well
			// within a second; the survivor cannot own its partitions
			// before the session timeout, so what is committed then is
			// the offset it must resume at.
			harness.Holds(t, time.Second, "the survivor owns none of the victim's partitions before the 6s session timeout", func() (bool, string) {
				s := parsePy(survivor.lines())
				return !slices.ContainsFunc(vParts, func(p int32) bool { return s.owned[p] }), fmt.Sprintf("survivor owns %v\n%s", s.ownedList(), both())
			})
			committed := harness.CommittedOffsets(t, adm, group, topic)
			harness.Eventually(t, session+10*time.Second-time.Since(killed), "survivor owns every partition", func() (bool, string) {
				s := parsePy(survivor.lines())
				return len(s.owned) == parts, fmt.Sprint(s.ownedList())
			})
			t.Logf("victim owned %v; survivor owns all %d partitions %v after the kill", vParts, parts, time.Since(killed).Round(time.Millisecond))
			// Records produced after the takeover reach the survivor too.
			mu.Lock()
			takeover := maps(produced)
			mu.Unlock()
			harness.Eventually(t, 20*time.Second, "survivor reads records produced after its takeover", func() (bool, string) {
				s := parsePy(survivor.lines())
				for p := range int32(parts) {
					if g := s.got[p]; len(g) == 0 || g[len(g)-1] < takeover[p] {
						return false, fmt.Sprintf("partition %d: produced up to %d at the takeover, survivor read %v", p, takeover[p], g[max(0, len(g)-3):])
					}
				}
				return true, ""
			})
			ends := stopProducing()
			harness.Eventually(t, 20*time.Second, "survivor commits to the end", func() (bool, string) {
				s := parsePy(survivor.lines())
				for p, end := range ends {
					if n := len(s.ok[p]); n == 0 || s.ok[p][n-1] != end-1 {
						return false, fmt.Sprintf("partition %d: end %d, last commits %v", p, end, s.ok[p][max(0, n-3):])
					}
				}
				return true, ""
			})
			v, s := parsePy(victim.lines()), parsePy(survivor.lines())
			if len(v.errs)+len(s.errs) > 0 {
				t.Fatalf("consumer errors: %v %v\n%s", v.errs, s.errs, both())
			}
			for _, p := range vParts {
				c := committed[p]
				// The victim printed OK for V once offset V+1 was
				// committed; a kill between the commit and the print
				// leaves V+2 committed, with V+1 received.
				var lastOK int64 = -1
				if n := len(v.ok[p]); n > 0 {
					lastOK = v.ok[p][n-1]
				}
				if c != lastOK+1 && !(c == lastOK+2 && slices.Contains(v.got[p], lastOK+1)) {
					t.Fatalf("partition %d: committed %d, victim's last confirmed commit was of offset %d\n%s", p, c, lastOK, both())
				}
				after := s.got[p][s.since[p]:]
				if len(after) == 0 || after[0] != c {
					t.Fatalf("partition %d: survivor resumed at %v, committed %d\n%s", p, after[:min(3, len(after))], c, both())
				}
				for i, o := range after {
					if o != c+int64(i) {
						t.Fatalf("partition %d: survivor read %d after %d (resumed at %d)\n%s", p, o, after[i-1], c, both())
					}
				}
			}
			// Between them every record was read; twice only if its
			// commit failed or was never confirmed (the victim's last).
			dups := 0
			for p, end := range ends {
				n := map[int64]int{}
				for _, o := range v.got[p] {
					n[o]++
				}
				for _, o := range s.got[p] {
					n[o]++
				}
				unconfirmed := int64(-1)
				if g := v.got[p]; len(g) > 0 && (len(v.ok[p]) == 0 || v.ok[p][len(v.ok[p])-1] != g[len(g)-1]) {
					unconfirmed = g[len(g)-1]
				}
				for o := range end {
					switch {
					case n[o] == 0:
						t.Fatalf("partition %d offset %d never read (end %d)\n%s", p, o, end, both())
					case n[o] > 1 && !v.failed[p][o] && !s.failed[p][o] && o != unconfirmed:
						t.Fatalf("partition %d offset %d read %d times, its commit confirmed\n%s", p, o, n[o], both())
					case n[o] > 1:
						dups++
					}
				}
			}
			resumed := map[int32]int64{}
			for _, p := range vParts {
				resumed[p] = committed[p]
			}
			t.Logf("ends %v, victim's partitions resumed at %v, %d records read twice (commit not confirmed)", ends, resumed, dups)
		})
	}
}

// crashSession is the session timeout of TestGroupsFranzMemberKilled's
// members: the broker's minimum is lowered to allow it, so waiting out the
// dead member costs 2s, not 6.
const crashSession = 2 * time.Second

// TestGroupsFranzMemberKilled: a franz-go member in a child process owns
// every partition and commits only part of what it reads, as a consumer
// that dies mid-work; a member in this process joins and takes half; the
// child is SIGKILLed. Within the session timeout plus a bound the
// remaining member owns every partition, and it starts each one exactly
// at the committed offset, reading everything after it.
func TestGroupsFranzMemberKilled(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir(), append(slices.Clone(groupBrokerArgs), "--group-min-session-timeout", "1s")...)
	for _, bal := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			t.Parallel()
			const parts, perPart, limit = 4, 100, 40
			topic, group := "crash-"+bal.ProtocolName(), "crash-"+bal.ProtocolName()
			cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			adm := kadm.NewClient(cl)
			harness.CreateTopic(t, adm, topic, parts, 1)
			child := startClientProc(t, "child", []string{
				"RINGLOG_GROUPS_CRASH_CHILD=" + strings.Join([]string{b.Addr, group, topic, bal.ProtocolName(), strconv.Itoa(limit)}, ","),
				"RINGLOG_TEST_BIN=" + harness.RinglogBin,
			}, os.Args[0], "-test.run", "^TestGroupsCrashChild$", "-test.v")
			// The child is alone when the records arrive, so it reads all
			// of them and commits offset limit on every partition.
			harness.Eventually(t, 30*time.Second, "child owns every partition", func() (bool, string) {
				asg, state := groupAssignment(t, adm, group, topic)
				return len(asg["crash-child"]) == parts, state
			})
			var rs []*kgo.Record
			for p := range int32(parts) {
				for range perPart {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")})
				}
			}
			if err := cl.ProduceSync(harness.Context(t, 20*time.Second), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, 20*time.Second, "child commits offset "+strconv.Itoa(limit), func() (bool, string) {
				c := harness.CommittedOffsets(t, adm, group, topic)
				for p := range int32(parts) {
					if c[p] != limit {
						return false, fmt.Sprintf("committed %v\n%s", c, child)
					}
				}
				return true, ""
			})
			m := harness.StartMember(t, b.Addr, group, topic, bal, kgo.SessionTimeout(crashSession), kgo.HeartbeatInterval(200*time.Millisecond))
			defer m.Close()
			var asg map[string][]int32
			harness.Eventually(t, 30*time.Second, "the two members split the partitions", func() (bool, string) {
				var state string
				asg, state = groupAssignment(t, adm, group, topic)
				return splitOver(asg, 2, parts) && slices.Equal(m.Assigned(), asg["kgo"]), state + fmt.Sprintf(" (this member: %v)", m.Assigned())
			})
			child.kill()
			d := waitBalanced(t, []*harness.Member{m}, parts, crashSession+5*time.Second)
			t.Logf("child owned %v; the remaining member owns all %d partitions %v after the SIGKILL (session %v)", asg["crash-child"], parts, d.Round(time.Millisecond), crashSession)
			harness.Eventually(t, 20*time.Second, "the remaining member reads to the end", func() (bool, string) {
				m.Mu.Lock()
				defer m.Mu.Unlock()
				for p := range int32(parts) {
					if len(m.Seen[p]) != perPart-limit {
						return false, fmt.Sprintf("partition %d: %d records", p, len(m.Seen[p]))
					}
				}
				return true, ""
			})
			m.Mu.Lock()
			first, seen := maps(m.First), m.Seen
			for p := range int32(parts) {
				if first[p] != limit {
					m.Mu.Unlock()
					t.Fatalf("partition %d: started at %d, committed %d (first offsets %v)", p, first[p], limit, first)
				}
				for o := int64(limit); o < perPart; o++ {
					if !seen[p][o] {
						m.Mu.Unlock()
						t.Fatalf("partition %d offset %d not read", p, o)
					}
				}
			}
			m.Mu.Unlock()
			harness.Eventually(t, 10*time.Second, "the remaining member commits the end", func() (bool, string) {
				c := harness.CommittedOffsets(t, adm, group, topic)
				for p := range int32(parts) {
					if c[p] != perPart {
						return false, fmt.Sprint(c)
					}
				}
				return true, ""
			})
		})
	}
}

// TestGroupsCrashChild is the member TestGroupsFranzMemberKilled kills:
// autocommit off, it commits only offsets below a limit.
func TestGroupsCrashChild(t *testing.T) {
	env := os.Getenv("RINGLOG_GROUPS_CRASH_CHILD")
	if env == "" {
		t.Skip("child of TestGroupsFranzMemberKilled")
	}
	f := strings.Split(env, ",")
	addr, group, topic := f[0], f[1], f[2]
	bal := kgo.RangeBalancer()
	if f[3] == "cooperative-sticky" {
		bal = kgo.CooperativeStickyBalancer()
	}
	limit, _ := strconv.ParseInt(f[4], 10, 64)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("crash-child"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(bal), kgo.SessionTimeout(crashSession), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		var done []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < limit {
				done = append(done, r)
			}
		})
		if len(done) > 0 {
			if err := cl.CommitRecords(context.Background(), done...); err != nil {
				t.Log("commit:", err)
			}
		}
	}
}

// topicsSet builds a kadm.TopicsSet from topic, partitions pairs.
func topicsSet(pairs ...any) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	for i := 0; i+1 < len(pairs); i += 2 {
		s.Add(pairs[i].(string), pairs[i+1].([]int32)...)
	}
	return s
}

// TestGroupsDeleteGroupsAndOffsets: DeleteGroups and OffsetDelete through
// kadm. With a live member, DeleteGroups answers NON_EMPTY_GROUP and
// OffsetDelete GROUP_SUBSCRIBED_TO_TOPIC for the subscribed topic while an
// unsubscribed topic's offsets go; once the group is empty both succeed.
// The deletions survive a restart, and a new member starts from scratch.
func TestGroupsDeleteGroupsAndOffsets(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted
	b, cl, adm := startGroupBroker(t)
	ctx := harness.Context(t, 60*time.Second)
	const group, sub, other, missing = "del-g", "del-sub", "del-other", "del-missing"
	harness.CreateTopic(t, adm, sub, 2, 1)
	harness.CreateTopic(t, adm, other, 1, 1)
	harness.ProduceN(t, cl, sub, 100)
	ends := harness.EndOffsets(t, adm, sub)
	// Offsets of a topic the group does not subscribe to, committed while
	// it is empty (a simple commit).
	o := kadm.Offsets{}
	o.AddOffset(other, 0, 5, -1)
	commitOffsets(ctx, t, adm, group, o)
	m := harness.StartMember(t, b.Addr, group, sub, kgo.RangeBalancer(), kgo.HeartbeatInterval(500*time.Millisecond))
	harness.Eventually(t, 30*time.Second, "member commits the end", func() (bool, string) {
		c := harness.CommittedOffsets(t, adm, group, sub)
		return c[0] == ends[0] && c[1] == ends[1], fmt.Sprintf("committed %v, ends %v", c, ends)
	})

	dr, err := adm.DeleteGroups(ctx, group, missing)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dr[group].Err, kerr.NonEmptyGroup) || !errors.Is(dr[missing].Err, kerr.GroupIDNotFound) {
		t.Fatalf("DeleteGroups with a live member: %v, unknown group: %v", dr[group].Err, dr[missing].Err)
	}
	do, err := adm.DeleteOffsets(ctx, group, topicsSet(sub, []int32{0, 1}, other, []int32{0}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 1} {
		if e, ok := do.Lookup(sub, p); !ok || !errors.Is(e, kerr.GroupSubscribedToTopic) {
			t.Fatalf("OffsetDelete of subscribed %s/%d: %v (present %v)", sub, p, e, ok)
		}
	}
	if e, ok := do.Lookup(other, 0); !ok || e != nil {
		t.Fatalf("OffsetDelete of unsubscribed %s/0: %v (present %v)", other, e, ok)
	}
	if c := harness.CommittedOffsets(t, adm, group, sub); c[0] != ends[0] || c[1] != ends[1] {
		t.Fatalf("subscribed offsets after a refused OffsetDelete: %v, want %v", c, ends)
	}
	if c := harness.CommittedOffsets(t, adm, group, other); len(c) != 0 {
		t.Fatalf("deleted offsets of %s still there: %v", other, c)
	}
	if _, err := adm.DeleteOffsets(ctx, missing, topicsSet(sub, []int32{0})); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("OffsetDelete of an unknown group: %v", err)
	}

	m.Close()
	harness.Eventually(t, 10*time.Second, "group empty", func() (bool, string) {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		return dg[group].State == "Empty", dg[group].State
	})
	if do, err := adm.DeleteOffsets(ctx, group, topicsSet(sub, []int32{0})); err != nil || do.Error() != nil {
		t.Fatalf("OffsetDelete on the empty group: %v %v", err, do.Error())
	}
	if c := harness.CommittedOffsets(t, adm, group, sub); len(c) != 1 || c[1] != ends[1] {
		t.Fatalf("after deleting %s/0: committed %v", sub, c)
	}
	if dr, err := adm.DeleteGroups(ctx, group); err != nil || dr[group].Err != nil {
		t.Fatalf("DeleteGroups on the empty group: %v %v", err, dr[group].Err)
	}
	gone := func(when string, adm *kadm.Client) {
		t.Helper()
		if c := harness.CommittedOffsets(t, adm, group, sub); len(c) != 0 {
			t.Fatalf("%s: deleted group has offsets %v", when, c)
		}
		lg, err := adm.ListGroups(harness.Context(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(lg.Groups(), group) {
			t.Fatalf("%s: deleted group listed: %v", when, lg.Groups())
		}
		dg, err := adm.DescribeGroups(harness.Context(t, 10*time.Second), group)
		if err != nil || dg[group].State != "Dead" {
			t.Fatalf("%s: deleted group described as %q (%v)", when, dg[group].State, err)
		}
	}
	gone("after delete", adm)
	// The tombstones are durable: the group stays gone after a restart.
	b.Stop()
	b.Restart()
	adm = kadm.NewClient(b.Client(t))
	gone("after restart", adm)
	m = harness.StartMember(t, b.Addr, group, sub, kgo.RangeBalancer())
	defer m.Close()
	harness.Eventually(t, 30*time.Second, "a new member starts from the beginning", func() (bool, string) {
		m.Mu.Lock()
		defer m.Mu.Unlock()
		return len(m.First) == 2 && m.First[0] == 0 && m.First[1] == 0, fmt.Sprint(m.First)
	})
}

// TestGroupsIndependentGroups: two groups (range and cooperative-sticky,
// two members each) consume one topic at once and each reads every
// record; group B then stops halfway while A goes on, and B's committed
// offsets stay where B left them, not where A is, until B resumes there.
func TestGroupsIndependentGroups(t *testing.T) {
	t.Parallel()
	b, cl, adm := startGroupBroker(t)
	const topic, ga, gb, parts = "indep", "indep-a", "indep-b", 4
	harness.CreateTopic(t, adm, topic, parts, 1)
	harness.ProduceN(t, cl, topic, 400)
	half := harness.EndOffsets(t, adm, topic)
	hb := kgo.HeartbeatInterval(500 * time.Millisecond)
	as := []*harness.Member{harness.StartMember(t, b.Addr, ga, topic, kgo.RangeBalancer(), hb), harness.StartMember(t, b.Addr, ga, topic, kgo.RangeBalancer(), hb)}
	bs := []*harness.Member{harness.StartMember(t, b.Addr, gb, topic, kgo.CooperativeStickyBalancer(), hb), harness.StartMember(t, b.Addr, gb, topic, kgo.CooperativeStickyBalancer(), hb)}
	defer func() {
		for _, m := range as {
			m.Close()
		}
	}()
	// readAll: the members together read every offset in [from, to).
	readAll := func(name string, ms []*harness.Member, from, to map[int32]int64) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, name+" reads every record", func() (bool, string) {
			for p, end := range to {
				for o := from[p]; o < end; o++ {
					if !slices.ContainsFunc(ms, func(m *harness.Member) bool {
						m.Mu.Lock()
						defer m.Mu.Unlock()
						return m.Seen[p][o]
					}) {
						return false, fmt.Sprintf("partition %d offset %d not read", p, o)
					}
				}
			}
			return true, ""
		})
	}
	committedAt := func(group string, want map[int32]int64) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, group+" commits", func() (bool, string) {
			c := harness.CommittedOffsets(t, adm, group, topic)
			return fmt.Sprint(c) == fmt.Sprint(want), fmt.Sprintf("committed %v, want %v", c, want)
		})
	}
	readAll(ga, as, nil, half)
	readAll(gb, bs, nil, half)
	committedAt(ga, half)
	committedAt(gb, half)
	for _, m := range bs {
		m.Close()
	}
	harness.ProduceN(t, cl, topic, 400)
	end := harness.EndOffsets(t, adm, topic)
	readAll(ga, as, nil, end)
	committedAt(ga, end)
	if c := harness.CommittedOffsets(t, adm, gb, topic); fmt.Sprint(c) != fmt.Sprint(half) {
		t.Fatalf("%s stopped at %v but has committed %v", gb, half, c)
	}
	// B resumes exactly where it stopped; A's offsets do not move.
	m := harness.StartMember(t, b.Addr, gb, topic, kgo.CooperativeStickyBalancer(), hb)
	defer m.Close()
	readAll(gb+" resumed", []*harness.Member{m}, half, end)
	m.Mu.Lock()
	first, count := maps(m.First), m.Count
	m.Mu.Unlock()
	if fmt.Sprint(first) != fmt.Sprint(half) {
		t.Fatalf("%s resumed at %v, committed %v", gb, first, half)
	}
	if want := 400; count != want {
		t.Fatalf("%s resumed and read %d records, want %d", gb, count, want)
	}
	committedAt(gb, end)
	if c := harness.CommittedOffsets(t, adm, ga, topic); fmt.Sprint(c) != fmt.Sprint(end) {
		t.Fatalf("%s committed %v after %s resumed, want %v", ga, c, gb, end)
	}
}
