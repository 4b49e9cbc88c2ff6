package admin

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceNumbered writes the values 0..n-1 to topic with acks=all.
func produceNumbered(t *testing.T, b *harness.BrokerProc, topic string, n int) {
	t.Helper()
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range n {
		cl.Produce(harness.Context(t, 30*time.Second), &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := cl.Flush(harness.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// checkNumbered reads topic from the start until it has seen the n values
// produceNumbered wrote: a move must lose none of them.
func checkNumbered(t *testing.T, b *harness.BrokerProc, topic string, n int) {
	t.Helper()
	cons := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx := harness.Context(t, 30*time.Second)
	for len(seen) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records of %s after the move, want %d", len(seen), topic, n)
	}
}

// TestAdminRebalanceApply applies a rebalance after broker 4 joined and
// checks the balance and the data. It needs AlterPartitionReassignments
// and ListPartitionReassignments (45/46) on the brokers, and skips where
// they are not served.
func TestAdminRebalanceApply(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // StartJoinedCluster restarts broker 4
	harness.SkipWithoutReassign(t)
	c, adm := harness.StartJoinedCluster(t, "apply", 12)
	boot := c.Node(1).Addr
	const records = 1200
	produceNumbered(t, c.Node(1), "apply", records)

	out := harness.MustAdmin(t, "rebalance", "--bootstrap", boot, "--wait", "--timeout", "60s", "--throttle", "10000000")
	if !strings.Contains(out, "all reassignments complete") {
		t.Fatalf("rebalance output:\n%s", out)
	}
	// Every broker holds 9 of the 36 replicas and leads about 3 partitions.
	harness.WaitMetadata(t, adm, 30*time.Second, "balanced replicas and leaders", func(m kadm.Metadata) bool {
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
	if out := harness.MustAdmin(t, "rebalance", "--bootstrap", boot, "--dry-run"); !strings.Contains(out, "0 partitions change") {
		t.Fatalf("rebalance after rebalance:\n%s", out)
	}
	checkNumbered(t, c.Node(2), "apply", records)
}

// UnregisterBroker needs ALTER on the cluster; `ringlog admin` passes the
// SASL connection flags through.
func TestAdminUnregisterAuthorization(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // startAuthorizedBroker restarts the broker
	b, as := startAuthorizedBroker(t, nil, "--fsync", "never")
	unregister := func(cl *kgo.Client, id int32) error {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl)
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
	harness.MustFailAdmin(t, "CLUSTER_AUTHORIZATION_FAILED", "unregister", "--bootstrap", b.Addr, "--broker", "7",
		"--sasl-user", "alice", "--sasl-password", "alice-pw")
	harness.MustFailAdmin(t, "BROKER_ID_NOT_REGISTERED", "unregister", "--bootstrap", b.Addr, "--broker", "7",
		"--sasl-user", "admin", "--sasl-password", "admin-pw")
	// ApiVersions lists it at v0.
	vs, err := kadm.NewClient(as("admin")).ApiVersions(harness.Context(t, 10*time.Second))
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
	t.Parallel()
	harness.SkipWithoutReassign(t)
	c := harness.StartClusterAt(t, harness.FreshNodeSpecs(t, 4), 3, nil)
	adm := kadm.NewClient(c.Node(1).Client(t))
	harness.CreateTopic(t, adm, "dec", 12, 3)
	m := harness.WaitMetadata(t, adm, 10*time.Second, "topic dec", func(m kadm.Metadata) bool { return len(m.Topics["dec"].Partitions) == 12 })
	on4 := 0
	for _, reps := range harness.Assignment(m, "dec") {
		if slices.Contains(reps, 4) {
			on4++
		}
	}
	if on4 == 0 {
		t.Fatal("placement put nothing on broker 4: nothing to decommission")
	}
	const records = 1200
	produceNumbered(t, c.Node(1), "dec", records)

	cmd := exec.CommandContext(harness.Context(t, 90*time.Second), harness.RinglogBin, "admin", "decommission",
		"--bootstrap", c.Node(1).Addr, "--broker", "4", "--unregister", "--timeout", "60s")
	out := &harness.SyncBuffer{}
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
	c.Node(4).Stop()
	if err := <-done; err != nil || !strings.Contains(out.String(), "broker 4 unregistered") {
		t.Fatalf("decommission: %v\n%s", err, out.String())
	}
	m = harness.WaitMetadata(t, adm, 10*time.Second, "broker 4 gone", harness.LacksBroker(4))
	reps := map[int32]int{}
	for _, p := range m.Topics["dec"].Partitions {
		for _, r := range p.Replicas {
			reps[r]++
		}
	}
	if reps[4] != 0 || reps[1] != 12 || reps[2] != 12 || reps[3] != 12 {
		t.Fatalf("replicas per broker after decommission: %v, want 12 each on 1-3", reps)
	}
	harness.MustFailAdmin(t, "BROKER_ID_NOT_REGISTERED", "unregister", "--bootstrap", c.Node(2).Addr, "--broker", "4")
	checkNumbered(t, c.Node(2), "dec", records)
}
