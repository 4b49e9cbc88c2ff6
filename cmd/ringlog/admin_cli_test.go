package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `ringlog admin` against real clusters: the planner's dry runs, the
// refusals, UnregisterBroker and plan-file validation. Applying moves
// needs AlterPartitionReassignments (TestAdminRebalanceApply).

// runAdmin runs `ringlog admin args...` and returns its combined output
// and exit error.
func runAdmin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(testContext(t, 90*time.Second), ringlogBin, append([]string{"admin"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustAdmin(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runAdmin(t, args...)
	if err != nil {
		t.Fatalf("ringlog admin %v: %v\n%s", args, err, out)
	}
	return out
}

func mustFailAdmin(t *testing.T, want string, args ...string) string {
	t.Helper()
	out, err := runAdmin(t, args...)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("ringlog admin %v: err %v, want a failure saying %q; output:\n%s", args, err, want, out)
	}
	return out
}

// assignment returns topic's replica lists by partition.
func assignment(m kadm.Metadata, topic string) map[int32][]int32 {
	out := map[int32][]int32{}
	for _, p := range m.Topics[topic].Partitions {
		out[p.Partition] = p.Replicas
	}
	return out
}

func hasBroker(id int32) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool { return slices.Contains(m.Brokers.NodeIDs(), id) }
}

func lacksBroker(id int32) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool { return !slices.Contains(m.Brokers.NodeIDs(), id) }
}

// startJoinedCluster starts 3 voters and broker 4 (a raft non-voter),
// creates topic (partitions x RF 3) while broker 4 is stopped, then starts
// broker 4 again: it joined after the topic was placed and holds nothing.
func startJoinedCluster(t *testing.T, topic string, partitions int32) (*testCluster, *kadm.Client) {
	t.Helper()
	c := startClusterAt(t, freshNodeSpecs(t, 4), 3, nil)
	adm := kadm.NewClient(c.node(1).client(t))
	c.node(4).stop()
	waitMetadata(t, adm, 20*time.Second, "broker 4 fenced", lacksBroker(4))
	createTopic(t, adm, topic, partitions, 3)
	c.node(4).restart()
	waitMetadata(t, adm, 20*time.Second, "broker 4 back", hasBroker(4))
	return c, adm
}

func TestAdminCLICluster(t *testing.T) {
	c, adm := startJoinedCluster(t, "bal", 12)
	boot := c.node(1).addr
	before := assignment(waitMetadata(t, adm, 10*time.Second, "topic bal", func(m kadm.Metadata) bool {
		return len(m.Topics["bal"].Partitions) == 12
	}), "bal")
	for p, reps := range before {
		if slices.Contains(reps, 4) {
			t.Fatalf("bal-%d on broker 4 before the rebalance: %v", p, reps)
		}
	}

	// A dry run plans moves onto broker 4 and changes nothing.
	planFile := filepath.Join(t.TempDir(), "plan.json")
	out := mustAdmin(t, "rebalance", "--bootstrap", boot, "--dry-run", "--plan-out", planFile)
	if !strings.Contains(out, "dry run: nothing changed") || !strings.Contains(out, "broker 4: 9 replicas in, 0 out") {
		t.Fatalf("rebalance --dry-run output:\n%s", out)
	}
	var plan kafkaPlan
	b, err := os.ReadFile(planFile)
	if err == nil {
		err = json.Unmarshal(b, &plan)
	}
	if err != nil {
		t.Fatal(err)
	}
	onto4 := 0
	for _, p := range plan.Partitions {
		if slices.Contains(p.Replicas, 4) {
			onto4++
		}
	}
	// 36 replicas over 4 brokers: 9 each.
	if plan.Version != 1 || onto4 != 9 {
		t.Fatalf("plan file: version %d, %d partitions onto broker 4 (want 9):\n%s", plan.Version, onto4, b)
	}
	m, err := adm.Metadata(testContext(t, 10*time.Second), "bal")
	if err != nil {
		t.Fatal(err)
	}
	for p, reps := range assignment(m, "bal") {
		if !slices.Equal(reps, before[p]) {
			t.Fatalf("dry run changed bal-%d: %v -> %v", p, before[p], reps)
		}
	}

	// UnregisterBroker: refused for a running broker...
	mustFailAdmin(t, "INVALID_REQUEST", "unregister", "--bootstrap", boot, "--broker", "4")
	// ... and for a stopped one that hosts replicas.
	c.node(3).stop()
	waitMetadata(t, adm, 20*time.Second, "broker 3 fenced", lacksBroker(3))
	out = mustFailAdmin(t, "INVALID_REPLICA_ASSIGNMENT", "unregister", "--bootstrap", boot, "--broker", "3")
	if !strings.Contains(out, "bal-") {
		t.Fatalf("refusal does not name the hosted partitions:\n%s", out)
	}
	c.node(3).restart()
	waitMetadata(t, adm, 20*time.Second, "broker 3 back", hasBroker(3))
	// Accepted for a stopped, empty broker; a second time it is unknown.
	c.node(4).stop()
	waitMetadata(t, adm, 20*time.Second, "broker 4 fenced", lacksBroker(4))
	// A heartbeat sent just before the stop may unfence it once more on
	// the controller until its session expires: INVALID_REQUEST until then.
	for deadline := time.Now().Add(2 * testSessionTimeout); ; {
		out, err = runAdmin(t, "unregister", "--bootstrap", boot, "--broker", "4")
		if err == nil && strings.Contains(out, "broker 4 unregistered") {
			break
		}
		if !strings.Contains(out, "INVALID_REQUEST") || time.Now().After(deadline) {
			t.Fatalf("unregister of the stopped, empty broker 4: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mustFailAdmin(t, "BROKER_ID_NOT_REGISTERED", "unregister", "--bootstrap", c.node(2).addr, "--broker", "4")

	// Decommission with 3 brokers and RF 3: refused, even as a dry run.
	out = mustFailAdmin(t, "cannot place replicas", "decommission", "--bootstrap", boot, "--broker", "1", "--dry-run")
	if !strings.Contains(out, "replication factor is 3 but only 2 brokers would remain") {
		t.Fatalf("refusal does not say why:\n%s", out)
	}

	// Plan files are validated before anything is sent.
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage.json":   "not json",
		"version.json":   `{"version":2,"partitions":[{"topic":"bal","partition":0,"replicas":[1,2,3]}]}`,
		"unknown.json":   `{"version":1,"partitions":[{"topic":"bal","partition":99,"replicas":[1,2,3]}]}`,
		"dup.json":       `{"version":1,"partitions":[{"topic":"bal","partition":0,"replicas":[1,1,3]}]}`,
		"empty.json":     `{"version":1,"partitions":[]}`,
		"noreplica.json": `{"version":1,"partitions":[{"topic":"bal","partition":0,"replicas":[]}]}`,
	} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		mustFailAdmin(t, f, "reassign", "--bootstrap", boot, "--plan", f)
	}
	mustFailAdmin(t, "no such file", "reassign", "--bootstrap", boot, "--plan", filepath.Join(dir, "missing.json"))
	// A valid plan passes validation (dry run).
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"version":1,"partitions":[{"topic":"bal","partition":0,"replicas":[3,2,1],"log_dirs":["any","any","any"]}]}`), 0o644)
	if out := mustAdmin(t, "reassign", "--bootstrap", boot, "--plan", good, "--dry-run"); !strings.Contains(out, "bal-0: ") {
		t.Fatalf("reassign --dry-run output:\n%s", out)
	}

	// A process started again with an unregistered id registers again.
	c.node(4).restart()
	waitMetadata(t, adm, 20*time.Second, "broker 4 registered again", hasBroker(4))
}

// produceNumbered writes the values 0..n-1 to topic with acks=all.
func produceNumbered(t *testing.T, b *brokerProc, topic string, n int) {
	t.Helper()
	cl := b.client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range n {
		cl.Produce(testContext(t, 30*time.Second), &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := cl.Flush(testContext(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// checkNumbered reads topic from the start until it has seen the n values
// produceNumbered wrote: a move must lose none of them.
func checkNumbered(t *testing.T, b *brokerProc, topic string, n int) {
	t.Helper()
	cons := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx := testContext(t, 30*time.Second)
	for len(seen) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records of %s after the move, want %d", len(seen), topic, n)
	}
}

// skipWithoutReassign skips t when the broker does not serve
// AlterPartitionReassignments and ListPartitionReassignments (45/46). It
// asks one broker: a skip should not cost a cluster start.
func skipWithoutReassign(t *testing.T) {
	t.Helper()
	probe := startBroker(t, t.TempDir())
	vs, err := kadm.NewClient(probe.client(t)).ApiVersions(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Sorted() {
		for _, key := range []int16{45, 46} {
			if _, ok := v.KeyMaxVersion(key); !ok {
				t.Skipf("the broker answers UNSUPPORTED_VERSION for API %d (partition reassignment not built in this binary)", key)
			}
		}
	}
	probe.stop()
}

// TestAdminRebalanceApply applies a rebalance after broker 4 joined and
// checks the balance and the data. It needs AlterPartitionReassignments
// and ListPartitionReassignments (45/46) on the brokers, and skips where
// they are not served.
func TestAdminRebalanceApply(t *testing.T) {
	skipWithoutReassign(t)
	c, adm := startJoinedCluster(t, "apply", 12)
	boot := c.node(1).addr
	const records = 1200
	produceNumbered(t, c.node(1), "apply", records)

	out := mustAdmin(t, "rebalance", "--bootstrap", boot, "--wait", "--timeout", "60s", "--throttle", "10000000")
	if !strings.Contains(out, "all reassignments complete") {
		t.Fatalf("rebalance output:\n%s", out)
	}
	// Every broker holds 9 of the 36 replicas and leads about 3 partitions.
	waitMetadata(t, adm, 30*time.Second, "balanced replicas and leaders", func(m kadm.Metadata) bool {
		reps, leads := map[int32]int{}, map[int32]int{}
		for _, p := range m.Topics["apply"].Partitions {
			if len(p.Replicas) != 3 {
				return false
			}
			for _, r := range p.Replicas {
				reps[r]++
			}
			leads[p.Leader]++
		}
		for id := int32(1); id <= 4; id++ {
			if reps[id] != 9 || leads[id] < 2 || leads[id] > 4 {
				return false
			}
		}
		return true
	})
	// A second plan finds nothing to do, and the throttle is gone.
	if out := mustAdmin(t, "rebalance", "--bootstrap", boot, "--dry-run"); !strings.Contains(out, "0 partitions change") {
		t.Fatalf("rebalance after rebalance:\n%s", out)
	}
	checkNumbered(t, c.node(2), "apply", records)
}

// UnregisterBroker needs ALTER on the cluster; `ringlog admin` passes the
// SASL connection flags through.
func TestAdminUnregisterAuthorization(t *testing.T) {
	b, as := startAuthorizedBroker(t, nil, "--fsync", "never")
	unregister := func(cl *kgo.Client, id int32) error {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		resp, err := req.RequestWith(testContext(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	if err := unregister(as("alice"), 7); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if err := unregister(as("admin"), 7); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unknown id: %v, want BROKER_ID_NOT_REGISTERED", err)
	}
	// The broker itself (node 1) is running.
	if err := unregister(as("admin"), 1); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("running broker: %v, want INVALID_REQUEST", err)
	}
	mustFailAdmin(t, "CLUSTER_AUTHORIZATION_FAILED", "unregister", "--bootstrap", b.addr, "--broker", "7",
		"--sasl-user", "alice", "--sasl-password", "alice-pw")
	mustFailAdmin(t, "BROKER_ID_NOT_REGISTERED", "unregister", "--bootstrap", b.addr, "--broker", "7",
		"--sasl-user", "admin", "--sasl-password", "admin-pw")
	// ApiVersions lists it at v0.
	vs, err := kadm.NewClient(as("admin")).ApiVersions(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Sorted() {
		if lo, hi, ok := v.KeyVersions(64); !ok || lo != 0 || hi != 0 {
			t.Fatalf("ApiVersions key 64: %d-%d %v, want 0-0", lo, hi, ok)
		}
	}
}

// TestAdminDecommissionApply empties broker 4 of a 4-broker cluster with
// `admin decommission --unregister`, stops it when the command asks, and
// checks that it is unregistered, the others hold its replicas evenly and
// every record is still there. Needs 45/46 like TestAdminRebalanceApply.
func TestAdminDecommissionApply(t *testing.T) {
	skipWithoutReassign(t)
	c := startClusterAt(t, freshNodeSpecs(t, 4), 3, nil)
	adm := kadm.NewClient(c.node(1).client(t))
	createTopic(t, adm, "dec", 12, 3)
	m := waitMetadata(t, adm, 10*time.Second, "topic dec", func(m kadm.Metadata) bool { return len(m.Topics["dec"].Partitions) == 12 })
	on4 := 0
	for _, reps := range assignment(m, "dec") {
		if slices.Contains(reps, 4) {
			on4++
		}
	}
	if on4 == 0 {
		t.Fatal("placement put nothing on broker 4: nothing to decommission")
	}
	const records = 1200
	produceNumbered(t, c.node(1), "dec", records)

	cmd := exec.CommandContext(testContext(t, 90*time.Second), ringlogBin, "admin", "decommission",
		"--bootstrap", c.node(1).addr, "--broker", "4", "--unregister", "--timeout", "60s")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "stop its process now") {
		select {
		case err := <-done:
			t.Fatalf("decommission ended before asking to stop the broker: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("decommission did not empty broker 4 within 60s:\n%s", out.String())
		}
	}
	c.node(4).stop()
	if err := <-done; err != nil || !strings.Contains(out.String(), "broker 4 unregistered") {
		t.Fatalf("decommission: %v\n%s", err, out.String())
	}
	m = waitMetadata(t, adm, 10*time.Second, "broker 4 gone", lacksBroker(4))
	reps := map[int32]int{}
	for _, p := range m.Topics["dec"].Partitions {
		for _, r := range p.Replicas {
			reps[r]++
		}
	}
	if reps[4] != 0 || reps[1] != 12 || reps[2] != 12 || reps[3] != 12 {
		t.Fatalf("replicas per broker after decommission: %v, want 12 each on 1-3", reps)
	}
	mustFailAdmin(t, "BROKER_ID_NOT_REGISTERED", "unregister", "--bootstrap", c.node(2).addr, "--broker", "4")
	checkNumbered(t, c.node(2), "dec", records)
}

// TestAdminReassignListCancel starts a throttled move with `admin reassign
// --plan --throttle`, sees it in `admin reassignments`, cancels it with
// `admin cancel`, and `admin reassignments --verify` then removes the
// throttle. Needs 45/46, and the throttle to hold the copy back.
func TestAdminReassignListCancel(t *testing.T) {
	skipWithoutReassign(t)
	c, adm := startJoinedCluster(t, "mv", 1)
	boot := c.node(1).addr
	// 4 MiB the new replica must copy at 20 KB/s: minutes, so the move
	// is still in progress while the test looks.
	cl := c.node(1).client(t, kgo.DefaultProduceTopic("mv"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := bytes.Repeat([]byte("x"), 4096)
	for range 1024 {
		cl.Produce(testContext(t, 30*time.Second), &kgo.Record{Value: val}, nil)
	}
	if err := cl.Flush(testContext(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	m := waitMetadata(t, adm, 10*time.Second, "topic mv", func(m kadm.Metadata) bool { return len(m.Topics["mv"].Partitions) == 1 })
	orig := assignment(m, "mv")[0]
	target := []int32{4, orig[1], orig[2]}
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d,%d,%d]}]}`, target[0], target[1], target[2])), 0o644)
	out := mustAdmin(t, "reassign", "--bootstrap", boot, "--plan", plan, "--throttle", "20000")
	if !strings.Contains(out, "started 1 reassignments") || !strings.Contains(out, "throttle stays set") {
		t.Fatalf("reassign output:\n%s", out)
	}
	// Broker 4 creates its replica when it applies the reassignment: until
	// then its progress reads "?".
	progress := regexp.MustCompile(`4:[0-9.]+[KMG]?i?B/4\.[0-9]MiB`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out = mustAdmin(t, "reassignments", "--bootstrap", boot)
		if !strings.Contains(out, "mv") || !strings.Contains(out, "[4]") || !strings.Contains(out, fmt.Sprintf("[%d]", orig[0])) {
			t.Fatalf("reassignments output (want mv-0 adding [4], removing [%d]):\n%s", orig[0], out)
		}
		if progress.MatchString(out) {
			t.Logf("admin reassignments:\n%s", out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignments output lacks broker 4's copy progress against 4 MiB:\n%s", out)
		}
	}
	// The throttle stays while the move runs.
	if out := mustAdmin(t, "reassignments", "--bootstrap", boot, "--verify"); !strings.Contains(out, "the throttle stays") {
		t.Fatalf("reassignments --verify during the move:\n%s", out)
	}
	out = mustAdmin(t, "cancel", "--bootstrap", boot, "--topic", "mv")
	if !strings.Contains(out, "cancelled 1 reassignments") {
		t.Fatalf("cancel output:\n%s", out)
	}
	out = mustAdmin(t, "reassignments", "--bootstrap", boot, "--verify")
	if !strings.Contains(out, "no reassignments in progress") || !strings.Contains(out, "replication throttle removed") {
		t.Fatalf("reassignments --verify after cancel:\n%s", out)
	}
	// Gone on every broker (another broker's image may lag a moment).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rc, err := adm.DescribeBrokerConfigs(testContext(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		set := ""
		for _, r := range rc {
			for _, cfg := range r.Configs {
				if (cfg.Key == leaderThrottleRate || cfg.Key == followerThrottleRate) && cfg.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
					set = fmt.Sprintf("broker %q: %s=%s", r.Name, cfg.Key, cfg.MaybeValue())
				}
			}
		}
		if set == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("throttle still set 10s after --verify: %s", set)
		}
	}
	// The cancelled partition is back on its original replicas.
	waitMetadata(t, adm, 10*time.Second, "mv-0 back on its original replicas", func(m kadm.Metadata) bool {
		reps := assignment(m, "mv")[0]
		return len(reps) == 3 && !slices.Contains(reps, 4) && slices.Contains(reps, orig[0])
	})
}
