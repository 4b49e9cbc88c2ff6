package admin

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ringlog/ringlog/e2e/harness"
)

// TestOperatorCommands runs the operator's command line (ringlog topic,
// produce, consume, group, cluster) through a topic's life on a fresh
// 3-broker ringlog cluster, and the same against franz-go's kfake, so the
// commands are known to work on a Kafka cluster that is not ringlog.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	t.Run("ringlog", func(t *testing.T) {
		c := harness.StartReplCluster(t, 3)
		operatorScenario(t, c.Node(1).Addr, true)
	})
	t.Run("kfake", func(t *testing.T) {
		kf, err := kfake.NewCluster(kfake.NumBrokers(3)) // on loopback, free ports
		if err != nil {
			t.Fatal(err)
		}
		defer kf.Close()
		operatorScenario(t, kf.ListenAddrs()[0], false)
	})
}

// ringlogCLI runs the binary against bootstrap and returns its stdout;
// a failure shows stderr.
func ringlogCLI(t *testing.T, bootstrap string, args ...string) string {
	t.Helper()
	out, err := ringlogCLIErr(t, bootstrap, "", args...)
	if err != nil {
		t.Fatalf("ringlog %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func ringlogCLIErr(t *testing.T, bootstrap, stdin string, args ...string) (string, error) {
	t.Helper()
	// Flags go before the positional arguments: --bootstrap right after
	// the command words (cluster config get: three of them).
	words := 2
	if args[0] == "produce" || args[0] == "consume" {
		words = 1
	} else if args[0] == "cluster" && args[1] == "config" {
		words = 3
	}
	i := min(words, len(args))
	full := append(append(slices.Clone(args[:i]), "--bootstrap", bootstrap), args[i:]...)
	cmd := exec.Command(harness.RinglogBin, full...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%v: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return v
}

func operatorScenario(t *testing.T, bootstrap string, isRinglog bool) {
	const topic, group = "ops", "ops-group"
	info := decodeJSON[struct {
		Brokers []struct {
			NodeID int32 `json:"node_id"`
		} `json:"brokers"`
		Controller int32 `json:"controller"`
	}](t, ringlogCLI(t, bootstrap, "cluster", "info", "--format", "json"))
	if len(info.Brokers) != 3 {
		t.Fatalf("cluster info: %d brokers, want 3", len(info.Brokers))
	}

	out := ringlogCLI(t, bootstrap, "topic", "create", "-p", "3", "-r", "3", "-c", "retention.ms=3600000", "-c", "cleanup.policy=delete", topic)
	if !strings.Contains(out, "created ops: 3 partitions, replication factor 3") {
		t.Fatalf("create: %q", out)
	}
	if _, err := ringlogCLIErr(t, bootstrap, "", "topic", "create", "-p", "3", topic); err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") || !strings.Contains(err.Error(), "--if-not-exists") {
		t.Fatalf("creating it again: %v, want TOPIC_ALREADY_EXISTS with the way out", err)
	}
	ringlogCLI(t, bootstrap, "topic", "create", "--if-not-exists", "-p", "3", topic)

	type described struct {
		Partitions        int `json:"partitions"`
		ReplicationFactor int `json:"replication_factor"`
		PartitionList     []struct {
			Partition int32   `json:"partition"`
			Leader    int32   `json:"leader"`
			Replicas  []int32 `json:"replicas"`
			ISR       []int32 `json:"isr"`
			LogEnd    int64   `json:"log_end"`
		} `json:"partition_list"`
		Configs []struct {
			Key, Value, Source string
		} `json:"configs"`
	}
	describe := func() described {
		ds := decodeJSON[[]described](t, ringlogCLI(t, bootstrap, "topic", "describe", "--format", "json", topic))
		if len(ds) != 1 {
			t.Fatalf("describe: %d topics", len(ds))
		}
		return ds[0]
	}
	configOf := func(d described, key string) string {
		for _, c := range d.Configs {
			if c.Key == key {
				return c.Value + " " + c.Source
			}
		}
		return ""
	}
	d := describe()
	if d.Partitions != 3 || d.ReplicationFactor != 3 || len(d.PartitionList) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	for _, p := range d.PartitionList {
		if len(p.Replicas) != 3 || p.Leader < 0 {
			t.Fatalf("partition %d: replicas %v leader %d", p.Partition, p.Replicas, p.Leader)
		}
	}
	if got := configOf(d, "retention.ms"); got != "3600000 DYNAMIC_TOPIC" {
		t.Fatalf("retention.ms: %q, want 3600000 DYNAMIC_TOPIC", got)
	}
	list := ringlogCLI(t, bootstrap, "topic", "list")
	if !strings.Contains(list, "ops") {
		t.Fatalf("topic list misses ops:\n%s", list)
	}

	// 30 keyed records, 10 keys: each key's records land on one partition,
	// in order.
	var lines strings.Builder
	for i := range 30 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i%10, i)
	}
	if _, err := ringlogCLIErr(t, bootstrap, lines.String(), "produce", "--key-separator", ":", "--header", "src=ops", topic); err != nil {
		t.Fatal(err)
	}
	got := ringlogCLI(t, bootstrap, "consume", "--count", "30", "--print", `%p %k %v %h\n`, topic)
	keyPart := map[string]string{}
	lastByKey := map[string]int{}
	for _, ln := range strings.Split(strings.TrimSpace(got), "\n") {
		var p, k, v, h string
		if _, err := fmt.Sscan(ln, &p, &k, &v, &h); err != nil {
			t.Fatalf("consumed line %q: %v", ln, err)
		}
		if h != "src=ops" {
			t.Fatalf("header %q", h)
		}
		if prev, ok := keyPart[k]; ok && prev != p {
			t.Fatalf("key %s on partitions %s and %s", k, prev, p)
		}
		keyPart[k] = p
		var n int
		fmt.Sscanf(v, "v%d", &n)
		if last, ok := lastByKey[k]; ok && n <= last {
			t.Fatalf("key %s: v%d after v%d", k, n, last)
		}
		lastByKey[k] = n
	}
	if len(lastByKey) != 10 {
		t.Fatalf("consumed %d keys, want 10:\n%s", len(lastByKey), got)
	}

	// A group reads 12 of them and commits what it printed.
	if out := ringlogCLI(t, bootstrap, "consume", "--group", group, "--count", "12", topic); strings.Count(out, "\n") != 12 {
		t.Fatalf("group consumed:\n%s", out)
	}
	type groupDesc struct {
		State      string `json:"state"`
		TotalLag   int64  `json:"total_lag"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Committed int64 `json:"committed"`
			LogEnd    int64 `json:"log_end"`
			Lag       int64 `json:"lag"`
		} `json:"partitions"`
	}
	describeGroup := func() groupDesc {
		var gd []groupDesc
		harness.Eventually(t, harness.SessionTimeout+10*time.Second, "the group empty after its consumer left", func() (bool, string) {
			gd = decodeJSON[[]groupDesc](t, ringlogCLI(t, bootstrap, "group", "describe", "--format", "json", group))
			return len(gd) == 1 && gd[0].State == "Empty", fmt.Sprintf("%+v", gd)
		})
		return gd[0]
	}
	// An empty group shows the partitions it committed for.
	g := describeGroup()
	var committed, lag int64
	for _, p := range g.Partitions {
		committed += p.Committed
		lag += p.LogEnd - p.Committed
	}
	if committed != 12 || g.TotalLag != lag {
		t.Fatalf("group: committed %d (want 12), total lag %d (want %d): %+v", committed, g.TotalLag, lag, g)
	}
	lists := ringlogCLI(t, bootstrap, "group", "list")
	if !strings.Contains(lists, group) {
		t.Fatalf("group list misses %s:\n%s", group, lists)
	}
	ringlogCLI(t, bootstrap, "group", "seek", "--to", "end", group)
	if g := describeGroup(); g.TotalLag != 0 {
		t.Fatalf("after seek to end: lag %d: %+v", g.TotalLag, g)
	}
	ringlogCLI(t, bootstrap, "group", "seek", "--to", "start", "--topic", topic, group)
	if g := describeGroup(); g.TotalLag != 30 || len(g.Partitions) != 3 {
		t.Fatalf("after seek to start of every partition: lag %d (want 30): %+v", g.TotalLag, g)
	}

	ringlogCLI(t, bootstrap, "topic", "alter-config", "--set", "retention.ms=7200000", "--delete", "cleanup.policy", topic)
	d = describe()
	if got := configOf(d, "retention.ms"); got != "7200000 DYNAMIC_TOPIC" {
		t.Fatalf("retention.ms after alter: %q", got)
	}
	if got := configOf(d, "cleanup.policy"); strings.HasSuffix(got, "DYNAMIC_TOPIC") {
		t.Fatalf("cleanup.policy still set on the topic: %q", got)
	}
	if isRinglog {
		// kfake has no broker-level dynamic configs to speak of.
		ringlogCLI(t, bootstrap, "cluster", "config", "set", "--set", "log.retention.ms=86400000")
		cfg := ringlogCLI(t, bootstrap, "cluster", "config", "get")
		if !strings.Contains(cfg, "log.retention.ms") || !strings.Contains(cfg, "86400000") {
			t.Fatalf("cluster config get after set:\n%s", cfg)
		}
		ringlogCLI(t, bootstrap, "cluster", "config", "delete", "--delete", "log.retention.ms")
	}

	ringlogCLI(t, bootstrap, "topic", "add-partitions", "--to", "5", topic)
	harness.Eventually(t, 10*time.Second, "5 partitions described", func() (bool, string) {
		d := describe()
		return d.Partitions == 5, fmt.Sprint(d.Partitions)
	})

	ringlogCLI(t, bootstrap, "group", "delete", group)
	ringlogCLI(t, bootstrap, "topic", "delete", topic)
	harness.Eventually(t, 10*time.Second, "the topic gone", func() (bool, string) {
		_, err := ringlogCLIErr(t, bootstrap, "", "topic", "describe", topic)
		return err != nil && strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION"), fmt.Sprint(err)
	})
}
