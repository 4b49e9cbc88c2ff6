package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsOffsetsRetention: --offsets-retention (offsets.retention.minutes)
// deletes the offsets of a group that is empty for that long, and of that
// group only: a group with a live member keeps its offsets. The deletion is
// durable (tombstones in __consumer_offsets): a restart does not bring the
// offsets back.
func TestGroupsOffsetsRetention(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted
	const retention = 2 * time.Second
	b, cl, adm := startGroupBroker(t, "--offsets-retention", retention.String(), "--offsets-retention-check-interval", "200ms")
	ctx := harness.Context(t, 60*time.Second)
	const topic = "retained"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	harness.ProduceN(t, cl, topic, 20)

	// "idle": offsets committed by an admin client, no members: Empty.
	o := kadm.Offsets{}
	o.AddOffset(topic, 0, 5, -1)
	o.AddOffset(topic, 1, 6, -1)
	commitOffsets(ctx, t, adm, "idle", o)
	// "live": a member consumes everything, commits and stays.
	m := harness.StartMember(t, b.Addr, "live", topic, kgo.RangeBalancer())
	defer m.Close()
	harness.Eventually(t, 30*time.Second, "live group commits all 20 records", func() (bool, string) {
		c := harness.CommittedOffsets(t, adm, "live", topic)
		return c[0]+c[1] == 20, fmt.Sprint("committed ", c)
	})
	if c := harness.CommittedOffsets(t, adm, "idle", topic); c[0] != 5 || c[1] != 6 {
		t.Fatalf("idle group committed %v right after its commit, want 5/6", c)
	}

	// Past retention plus a few check intervals: idle's offsets are gone.
	harness.Eventually(t, retention+5*time.Second, "idle group's offsets expire", func() (bool, string) {
		c := harness.CommittedOffsets(t, adm, "idle", topic)
		return len(c) == 0, fmt.Sprint("still has offsets ", c)
	})
	if c := harness.CommittedOffsets(t, adm, "live", topic); c[0]+c[1] != 20 {
		t.Fatalf("live group's offsets expired: %v", c)
	}

	b.Stop()
	b.Restart()
	adm = kadm.NewClient(b.Client(t))
	if c := harness.CommittedOffsets(t, adm, "idle", topic); len(c) != 0 {
		t.Fatalf("idle group's expired offsets back after restart: %v", c)
	}
}
