package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAdminCLICluster(t *testing.T) {
	c, adm := harness.StartJoinedCluster(t, "bal", 12)
	boot := c.Node(1).Addr
	before := harness.Assignment(harness.WaitMetadata(t, adm, 10*time.Second, "topic bal", func(m kadm.Metadata) bool {
		return len(m.Topics["bal"].Partitions) == 12
	}), "bal")
	for p, reps := range before {
		if slices.Contains(reps, 4) {
			t.Fatalf("bal-%d on broker 4 before the rebalance: %v", p, reps)
		}
	}

	// A dry run plans moves onto broker 4 and changes nothing.
	planFile := filepath.Join(t.TempDir(), "plan.json")
	out := harness.MustAdmin(t, "rebalance", "--bootstrap", boot, "--dry-run", "--plan-out", planFile)
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
	m, err := adm.Metadata(harness.Context(t, 10*time.Second), "bal")
	if err != nil {
		t.Fatal(err)
	}
	for p, reps := range harness.Assignment(m, "bal") {
		if !slices.Equal(reps, before[p]) {
			t.Fatalf("dry run changed bal-%d: %v -> %v", p, before[p], reps)
		}
	}

	// UnregisterBroker: refused for a running broker...
	harness.MustFailAdmin(t, "INVALID_REQUEST", "unregister", "--bootstrap", boot, "--broker", "4")
	// ... and for a stopped one that hosts replicas.
	c.Node(3).Stop()
	harness.WaitMetadata(t, adm, 20*time.Second, "broker 3 fenced", harness.LacksBroker(3))
	out = harness.MustFailAdmin(t, "INVALID_REPLICA_ASSIGNMENT", "unregister", "--bootstrap", boot, "--broker", "3")
	if !strings.Contains(out, "bal-") {
		t.Fatalf("refusal does not name the hosted partitions:\n%s", out)
	}
	c.Node(3).Restart()
	harness.WaitMetadata(t, adm, 20*time.Second, "broker 3 back", harness.HasBroker(3))
	// Accepted for a stopped, empty broker; a second time it is unknown.
	c.Node(4).Stop()
	harness.WaitMetadata(t, adm, 20*time.Second, "broker 4 fenced", harness.LacksBroker(4))
	// A heartbeat sent just before the stop may unfence it once more on
	// the controller until its session expires: INVALID_REQUEST until then.
	harness.Eventually(t, 2*harness.SessionTimeout, "unregister of the stopped, empty broker 4", func() (bool, string) {
		out, err = harness.RunAdmin(t, "unregister", "--bootstrap", boot, "--broker", "4")
		if err == nil && strings.Contains(out, "broker 4 unregistered") {
			return true, ""
		}
		if !strings.Contains(out, "INVALID_REQUEST") {
			t.Fatalf("unregister of the stopped, empty broker 4: %v\n%s", err, out)
		}
		return false, fmt.Sprintf("%v\n%s", err, out)
	})
	harness.MustFailAdmin(t, "BROKER_ID_NOT_REGISTERED", "unregister", "--bootstrap", c.Node(2).Addr, "--broker", "4")

	// Decommission with 3 brokers and RF 3: refused, even as a dry run.
	out = harness.MustFailAdmin(t, "cannot place replicas", "decommission", "--bootstrap", boot, "--broker", "1", "--dry-run")
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
		harness.MustFailAdmin(t, f, "reassign", "--bootstrap", boot, "--plan", f)
	}
	harness.MustFailAdmin(t, "no such file", "reassign", "--bootstrap", boot, "--plan", filepath.Join(dir, "missing.json"))
	// A valid plan passes validation (dry run).
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"version":1,"partitions":[{"topic":"bal","partition":0,"replicas":[3,2,1],"log_dirs":["any","any","any"]}]}`), 0o644)
	if out := harness.MustAdmin(t, "reassign", "--bootstrap", boot, "--plan", good, "--dry-run"); !strings.Contains(out, "bal-0: ") {
		t.Fatalf("reassign --dry-run output:\n%s", out)
	}

	// A process started again with an unregistered id registers again.
	c.Node(4).Restart()
	harness.WaitMetadata(t, adm, 20*time.Second, "broker 4 registered again", harness.HasBroker(4))
}

// TestAdminReassignListCancel starts a throttled move with `admin reassign
// --plan --throttle`, sees it in `admin reassignments`, cancels it with
// `admin cancel`, and `admin reassignments --verify` then removes the
// throttle. Needs 45/46, and the throttle to hold the copy back.
func TestAdminReassignListCancel(t *testing.T) {
	harness.SkipWithoutReassign(t)
	c, adm := harness.StartJoinedCluster(t, "mv", 1)
	boot := c.Node(1).Addr
	// 4 MiB the new replica must copy at 20 KB/s: minutes, so the move
	// is still in progress while the test looks.
	cl := c.Node(1).Client(t, kgo.DefaultProduceTopic("mv"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := bytes.Repeat([]byte("x"), 4096)
	for range 1024 {
		cl.Produce(harness.Context(t, 30*time.Second), &kgo.Record{Value: val}, nil)
	}
	if err := cl.Flush(harness.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	m := harness.WaitMetadata(t, adm, 10*time.Second, "topic mv", func(m kadm.Metadata) bool { return len(m.Topics["mv"].Partitions) == 1 })
	orig := harness.Assignment(m, "mv")[0]
	target := []int32{4, orig[1], orig[2]}
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d,%d,%d]}]}`, target[0], target[1], target[2])), 0o644)
	out := harness.MustAdmin(t, "reassign", "--bootstrap", boot, "--plan", plan, "--throttle", "20000")
	if !strings.Contains(out, "started 1 reassignments") || !strings.Contains(out, "throttle stays set") {
		t.Fatalf("reassign output:\n%s", out)
	}
	// Broker 4 creates its replica when it applies the reassignment: until
	// then its progress reads "?".
	progress := regexp.MustCompile(`4:[0-9.]+[KMG]?i?B/4\.[0-9]MiB`)
	harness.Eventually(t, 10*time.Second, "broker 4's copy progress against 4 MiB in the reassignments output", func() (bool, string) {
		out = harness.MustAdmin(t, "reassignments", "--bootstrap", boot)
		if !strings.Contains(out, "mv") || !strings.Contains(out, "[4]") || !strings.Contains(out, fmt.Sprintf("[%d]", orig[0])) {
			t.Fatalf("reassignments output (want mv-0 adding [4], removing [%d]):\n%s", orig[0], out)
		}
		return progress.MatchString(out), out
	})
	t.Logf("admin reassignments:\n%s", out)
	// The throttle stays while the move runs.
	if out := harness.MustAdmin(t, "reassignments", "--bootstrap", boot, "--verify"); !strings.Contains(out, "the throttle stays") {
		t.Fatalf("reassignments --verify during the move:\n%s", out)
	}
	out = harness.MustAdmin(t, "cancel", "--bootstrap", boot, "--topic", "mv")
	if !strings.Contains(out, "cancelled 1 reassignments") {
		t.Fatalf("cancel output:\n%s", out)
	}
	out = harness.MustAdmin(t, "reassignments", "--bootstrap", boot, "--verify")
	if !strings.Contains(out, "no reassignments in progress") || !strings.Contains(out, "replication throttle removed") {
		t.Fatalf("reassignments --verify after cancel:\n%s", out)
	}
	// Gone on every broker (another broker's image may lag a moment).
	harness.Eventually(t, 10*time.Second, "the throttle removed on every broker after --verify", func() (bool, string) {
		rc, err := adm.DescribeBrokerConfigs(harness.Context(t, 10*time.Second))
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
		return set == "", "still set: " + set
	})
	// The cancelled partition is back on its original replicas.
	harness.WaitMetadata(t, adm, 10*time.Second, "mv-0 back on its original replicas", func(m kadm.Metadata) bool {
		reps := harness.Assignment(m, "mv")[0]
		return len(reps) == 3 && !slices.Contains(reps, 4) && slices.Contains(reps, orig[0])
	})
}
