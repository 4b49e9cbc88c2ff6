package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/results"
)

// agentProc is a `ringlog loadgen agent` process on a free loopback port.
type agentProc struct {
	cmd    *exec.Cmd
	addr   string
	out    *harness.SyncBuffer
	exited chan struct{}
}

// startAgent starts an agent with token (from the environment, as an
// operator would set it) and returns once it printed its address.
func startAgent(t *testing.T, token string) *agentProc {
	t.Helper()
	a := &agentProc{out: &harness.SyncBuffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(harness.RinglogBin, "loadgen", "agent", "--listen", "127.0.0.1:0")
	a.cmd.Env = append(os.Environ(), "RINGLOG_AGENT_TOKEN="+token)
	a.cmd.Stderr = a.out
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(10 * time.Second):
			a.cmd.Process.Kill()
			<-a.exited
		}
	})
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		l, _ := br.ReadString('\n')
		line <- l
		io.Copy(a.out, br)
	}()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(l), "agent listening on ")
		if !ok {
			t.Fatalf("agent printed %q, want \"agent listening on ADDR\"; stderr: %s", l, a.out)
		}
		a.addr = addr
	case <-time.After(15 * time.Second):
		t.Fatalf("agent did not print its address; stderr: %s", a.out)
	}
	return a
}

// checkFleetSums: the merged result's counters are the sums of the
// agents' parts, each part is on disk under agents/, and `ringlog report
// merge` of those parts gives the same histograms.
func checkFleetSums(t *testing.T, ctx context.Context, dir string, merged *results.Result) []*results.Result {
	t.Helper()
	var sent, acked, errs int64
	var target float64
	var dirs []string
	var parts []*results.Result
	for _, a := range merged.Agents {
		part, err := results.ReadJSON(filepath.Join(dir, a.Dir))
		if err != nil {
			t.Fatalf("agent %s: %v", a.Name, err)
		}
		parts = append(parts, part)
		if part.MessagesSent != a.MessagesSent || part.MessagesAcked != a.MessagesAcked {
			t.Errorf("agent %s: table says sent %d acked %d, its result.json %d %d", a.Name, a.MessagesSent, a.MessagesAcked, part.MessagesSent, part.MessagesAcked)
		}
		sent += part.MessagesSent
		acked += part.MessagesAcked
		errs += part.Errors
		target += a.TargetRate
		dirs = append(dirs, filepath.Join(dir, a.Dir))
	}
	if merged.MessagesSent != sent || merged.MessagesAcked != acked || merged.Errors != errs {
		t.Errorf("merged sent/acked/errors %d/%d/%d, agents' sum %d/%d/%d", merged.MessagesSent, merged.MessagesAcked, merged.Errors, sent, acked, errs)
	}
	if merged.AckLatencyMs.Count != acked {
		t.Errorf("merged ack histogram holds %d values, agents acked %d", merged.AckLatencyMs.Count, acked)
	}
	if d := target - merged.TargetRate; d > 0.001 || d < -0.001 {
		t.Errorf("agents' target rates sum to %v, merged target %v", target, merged.TargetRate)
	}
	ref := filepath.Join(t.TempDir(), "report-merge")
	if out, code := harness.RunRinglogCode(t, ctx, append([]string{"report", "merge", "--out", ref}, dirs...)...); code != 0 {
		t.Fatalf("report merge: exit %d\n%s", code, out)
	}
	for _, f := range []string{results.AckHgrmFile, results.SendDelayHgrmFile, results.AckLogFile} {
		want, err1 := os.ReadFile(filepath.Join(ref, f))
		got, err2 := os.ReadFile(filepath.Join(dir, f))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", f, err1, err2)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from `report merge` of the agents' parts:\n%s\nwant:\n%s", f, got, want)
		}
	}
	rm, err := results.ReadJSON(ref)
	if err != nil {
		t.Fatal(err)
	}
	if rm.AckLatencyMs != merged.AckLatencyMs || rm.SendDelayMs != merged.SendDelayMs {
		t.Errorf("ack/send-delay percentiles %+v %+v, `report merge` %+v %+v", merged.AckLatencyMs, merged.SendDelayMs, rm.AckLatencyMs, rm.SendDelayMs)
	}
	return parts
}

// TestHarnessAgents: three agent processes and a 3-broker cluster;
// `loadgen --agents` at 30k msg/s writes one merged result whose counts
// are the agents' sums and whose histograms equal `report merge` of the
// parts. A wrong token and an unreachable agent stop the run before it
// starts, naming the agent.
func TestHarnessAgents(t *testing.T) {
	ctx := harness.Context(t, 120*time.Second)
	c := harness.StartCluster(t, 3)
	const token = "harness-token"
	var addrs []string
	for range 3 {
		addrs = append(addrs, startAgent(t, token).addr)
	}
	bootstrap := strings.Join(c.Addrs(), ",")
	base := []string{"loadgen", "--bootstrap", bootstrap, "--topic", "agents", "--partitions", "6",
		"--replication-factor", "3", "--acks", "all", "--message-size", "100",
		"--rate", "30000", "--producers", "3", "--warmup", "1s", "--duration", "4s"}

	out, code := harness.RunRinglogCode(t, ctx, append(base, "--agents", strings.Join(addrs, ","), "--agent-token", "wrong", "--out", t.TempDir())...)
	if code == 0 || !strings.Contains(out, "run not started") || !strings.Contains(out, addrs[0]) || !strings.Contains(out, "401") {
		t.Fatalf("wrong token: exit %d, want a refusal naming the agents:\n%s", code, out)
	}
	gone := harness.FreePort(t)
	out, code = harness.RunRinglogCode(t, ctx, append(base, "--agents", addrs[0]+","+gone, "--agent-token", token, "--out", t.TempDir())...)
	if code == 0 || !strings.Contains(out, "run not started") || !strings.Contains(out, "agent "+gone) {
		t.Fatalf("unreachable agent: exit %d, want a refusal naming %s:\n%s", code, gone, out)
	}

	dir := t.TempDir()
	out, code = harness.RunRinglogCode(t, ctx, append(base, "--agents", strings.Join(addrs, ","), "--agent-token", token, "--out", dir)...)
	if code != 0 {
		t.Fatalf("loadgen --agents: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "agents reporting 3/3") {
		t.Errorf("no fleet progress line with all three agents reporting:\n%s", out)
	}
	merged, err := results.ReadJSON(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.Agents) != 3 || merged.Incomplete {
		t.Fatalf("agents %+v, incomplete %v (%s)", merged.Agents, merged.Incomplete, merged.IncompleteReason)
	}
	parts := checkFleetSums(t, ctx, dir, merged)
	for i, a := range merged.Agents {
		if a.Missing || a.TargetRate != 10000 || parts[i].MessagesAcked == 0 {
			t.Errorf("agent %+v: want 10000 msg/s, present, with acked messages", a)
		}
	}
	// Open loop: every scheduled message of the measured window is sent,
	// even by a generator that falls behind.
	if merged.MessagesSent < 4*30000*95/100 || merged.Errors != 0 {
		t.Errorf("sent %d (want about %d), errors %d (%s)", merged.MessagesSent, 4*30000, merged.Errors, merged.FirstError)
	}
	if merged.Environment.ClientHosts != 1 || merged.Environment.ClientCPUs != runtime.NumCPU() {
		t.Errorf("client hosts %d cpus %d, want 1 host (all agents on loopback) and %d", merged.Environment.ClientHosts, merged.Environment.ClientCPUs, runtime.NumCPU())
	}
	if _, err := os.Stat(filepath.Join(dir, results.HTMLFile)); err != nil {
		t.Error(err)
	}
}

// TestHarnessAgentDies: kill -9 one of three agents mid-run; the controller
// carries on, and the merged result names the agent as missing, is marked
// incomplete, keeps the lost agent's target share and the intervals it
// sent, and has the others' data; the command exits 1 with an INCOMPLETE
// verdict.
func TestHarnessAgentDies(t *testing.T) {
	ctx := harness.Context(t, 90*time.Second)
	b := harness.StartBroker(t, t.TempDir())
	const token = "harness-token"
	var agents []*agentProc
	var addrs []string
	for range 3 {
		a := startAgent(t, token)
		agents = append(agents, a)
		addrs = append(addrs, a.addr)
	}
	victim := agents[1]
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, harness.RinglogBin, "loadgen", "--bootstrap", b.Addr, "--topic", "agents-die",
		"--partitions", "3", "--rate", "3000", "--producers", "3", "--message-size", "100",
		"--warmup", "1s", "--duration", "6s", "--agents", strings.Join(addrs, ","), "--agent-token", token, "--out", dir)
	out := &harness.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the measured window has run a second past its first
	// progress line with latencies (two such lines), so the victim has
	// sent some measured intervals. On a failure here the context's
	// cleanup kills loadgen.
	harness.Eventually(t, 30*time.Second, "two measured progress lines from all 3 agents", func() (bool, string) {
		return strings.Count(out.String(), "ms (this second, merged)  agents reporting 3/3") >= 2, "\n" + out.String()
	})
	victim.cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("loadgen: %v, want exit status 1 (incomplete)\n%s", err, out)
	}
	if !strings.Contains(out.String(), "INCOMPLETE") || !strings.Contains(out.String(), "agent "+victim.addr+" LOST") {
		t.Errorf("output does not name the lost agent %s with an INCOMPLETE verdict:\n%s", victim.addr, out)
	}
	merged, err := results.ReadJSON(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !merged.Incomplete || !strings.Contains(merged.IncompleteReason, victim.addr) || merged.SLA.Pass || !strings.Contains(out.String(), "SLA FAIL") {
		t.Errorf("incomplete %v reason %q sla pass %v: want incomplete, naming %s, and no pass", merged.Incomplete, merged.IncompleteReason, merged.SLA.Pass, victim.addr)
	}
	if len(merged.Agents) != 3 {
		t.Fatalf("agents %+v: want all three, the lost one included", merged.Agents)
	}
	parts := checkFleetSums(t, ctx, dir, merged)
	// The lost share shows as a shortfall, not as a rate over its shorter life.
	if merged.AchievedRate > 0.95*merged.TargetRate {
		t.Errorf("achieved %.0f msg/s of %.0f: the lost agent's share is credited", merged.AchievedRate, merged.TargetRate)
	}
	for i, a := range merged.Agents {
		if a.TargetRate != 1000 {
			t.Errorf("agent %s: target %v, want its share 1000 kept", a.Name, a.TargetRate)
		}
		if a.Name == victim.addr {
			if !a.Missing || a.MissingReason == "" || !parts[i].Incomplete {
				t.Errorf("lost agent %+v: want missing with a reason, its part incomplete", a)
			}
			if parts[i].MessagesAcked == 0 || parts[i].MessagesAcked >= 6*1000 {
				t.Errorf("lost agent acked %d: want the part it reported before it died (0 < n < %d)", parts[i].MessagesAcked, 6*1000)
			}
			continue
		}
		if a.Missing || parts[i].MessagesAcked < 6*1000*95/100 {
			t.Errorf("surviving agent %+v (acked %d): want present with its whole window", a, parts[i].MessagesAcked)
		}
	}
}
