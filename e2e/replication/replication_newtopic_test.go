package replication

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationNewTopicFirstProduce: on a fresh 3-broker
// cluster, the first acks=all produce to each of 10 newly created RF=3
// topics (min.insync.replicas=2), sent by a kcat process started as soon
// as CreateTopics answered, is acknowledged without waiting for a
// follower's long poll (replication FetchMaxWait, 500 ms) to run out.
//
// Such a produce waits for both followers to fetch the new partition.
// A follower that hears of the topic before its leader does is answered
// UNKNOWN_TOPIC_OR_PARTITION and backs off a few milliseconds; it used to
// be retried only when the long poll of its other partitions, sent
// meanwhile, ended (3 of 5 first produces in the issue took 490-590 ms).
// Brokers also heard of a new topic 50-100 ms after the controller (raft's
// CommitTimeout), which the produce waited for too, and a produce that
// reached the leader before its reconcile pass had taken the partition up
// was answered NOT_LEADER_OR_FOLLOWER, which kcat retries 100 ms later.
//
// Timings on a shared machine are noisy, so the bound is one only those
// waits break: every produce request is answered within 250 ms as the
// brokers measure it (ringlog_request_duration_seconds, which leaves
// kcat's start and connection out) and every kcat run ends within 250 ms.
// The 10 kcat wall times are logged; the aim is under 100 ms.
func TestReplicationNewTopicFirstProduce(t *testing.T) {
	harness.InProcess(t)
	harness.NeedTool(t, "/usr/bin/kcat")
	c := harness.StartReplCluster(t, 3)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	bootstrap := strings.Join(c.Addrs(), ",")
	const tries = 10
	const bound = 250 * time.Millisecond
	var (
		topics []string
		took   []time.Duration
	)
	for i := range tries {
		topic := fmt.Sprintf("first-produce-%d", i)
		resp, err := adm.CreateTopic(harness.Context(t, 30*time.Second), 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(harness.Context(t, 30*time.Second), "/usr/bin/kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "acks=all")
		cmd.Stdin = strings.NewReader("first\n")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err = cmd.Run()
		d := time.Since(start)
		if err != nil {
			t.Fatalf("kcat producing to %s: %v\n%s", topic, err, out.String())
		}
		topics = append(topics, topic)
		took = append(took, d)
	}
	ms := make([]string, len(took))
	within100 := 0
	for i, d := range took {
		ms[i] = fmt.Sprint(d.Milliseconds())
		if d <= 100*time.Millisecond {
			within100++
		}
	}
	t.Logf("first acks=all produce to each new topic, kcat wall time (ms): %s; %d of %d within 100 ms", strings.Join(ms, " "), within100, tries)

	// Each record is committed: the high watermark of each topic is 1.
	ends, err := adm.ListEndOffsets(harness.Context(t, 10*time.Second), topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		if o, ok := ends.Lookup(topic, 0); !ok || o.Offset != 1 {
			t.Errorf("%s: end offset %+v, want 1", topic, o)
		}
	}

	// The brokers' own measure of the produce requests: all within bound.
	var count, fast float64
	for _, b := range c.Nodes {
		m := harness.Scrape(t, b.Admin)
		n, _ := harness.SumSeries(m, "ringlog_request_duration_seconds_count", `api="Produce"`)
		f, _ := harness.SumSeries(m, "ringlog_request_duration_seconds_bucket", `api="Produce"`, fmt.Sprintf(`le="%g"`, bound.Seconds()))
		count += n
		fast += f
	}
	if count < tries || fast != count {
		t.Errorf("brokers answered %v produce requests, %v of them within %v; want all (at least %d)", count, fast, bound, tries)
	}
	for i, d := range took {
		if d > bound {
			t.Errorf("kcat producing to %s took %v, more than %v", topics[i], d.Round(time.Millisecond), bound)
		}
	}
}
