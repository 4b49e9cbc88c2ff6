package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerProtoWireSmoke speaks the consumer (KIP-848) group protocol
// to a real broker with raw requests: ApiVersions advertises
// ConsumerGroupHeartbeat and ConsumerGroupDescribe v0-1 (franz-go opts in
// on v1), a v1 join names its own member id and gets an epoch, the
// broker's heartbeat interval and an assignment of the subscribed topic,
// and ConsumerGroupDescribe and ListGroups v5 show the group as a
// consumer group.
func TestConsumerProtoWireSmoke(t *testing.T) {
	t.Parallel()
	b, cl, adm := startGroupBroker(t, "--group-consumer-session-timeout", "6s", "--group-consumer-heartbeat-interval", "1s")
	ctx := harness.Context(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "smoke848"); err != nil {
		t.Fatal(err)
	}

	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16]bool{68: true, 69: true}
	for _, k := range av.ApiKeys {
		if want[k.ApiKey] {
			if k.MinVersion != 0 || k.MaxVersion != 1 {
				t.Fatalf("key %d advertised v%d-%d, want v0-1", k.ApiKey, k.MinVersion, k.MaxVersion)
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not advertised: %v", want)
	}

	// Join (epoch 0). The first requests may meet the offsets topic
	// being created and loaded: retried for a bounded time.
	const group, member = "smoke848-g", "smoke848-member-1"
	join := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	join.Group, join.MemberID, join.MemberEpoch = group, member, 0
	join.RebalanceTimeoutMillis = 30_000
	join.SubscribedTopicNames = []string{"smoke848"}
	join.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	harness.Eventually(t, 30*time.Second, "the join answered by a loaded coordinator", func() (bool, string) {
		resp, err = join.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		code := kerr.ErrorForCode(resp.ErrorCode)
		retriable := code == kerr.CoordinatorLoadInProgress || code == kerr.NotCoordinator || code == kerr.CoordinatorNotAvailable
		return !retriable, fmt.Sprint(code)
	})
	if resp.Version != 1 {
		t.Fatalf("heartbeat went as v%d, want v1", resp.Version)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("join: %v (%v)", kerr.ErrorForCode(resp.ErrorCode), smokeStr(resp.ErrorMessage))
	}
	if resp.MemberID == nil || *resp.MemberID != member || resp.MemberEpoch < 1 || resp.HeartbeatIntervalMillis != 1000 {
		t.Fatalf("join answer: member %v epoch %d interval %d", smokeStr(resp.MemberID), resp.MemberEpoch, resp.HeartbeatIntervalMillis)
	}
	// The only member is assigned every partition; heartbeat until the
	// assignment arrives (it may come on a later heartbeat).
	epoch, parts := resp.MemberEpoch, smokeAssigned(resp)
	// Heartbeats at half the interval the broker asked for.
	tick := time.NewTicker(time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond / 2)
	defer tick.Stop()
	for i := 0; parts != 3 && i < 20; i++ {
		<-tick.C
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch = group, member, epoch
		if resp, err = hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
		}
		epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			parts = smokeAssigned(resp)
		}
	}
	if parts != 3 {
		t.Fatalf("the only member owns %d of 3 partitions", parts)
	}

	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Groups = []string{group}
	dr, err := desc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 1 {
		t.Fatalf("describe: %+v", dr.Groups)
	}
	if m := dr.Groups[0].Members[0]; m.MemberID != member || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "smoke848" {
		t.Fatalf("described member: %+v", m)
	}

	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"consumer"}
	lr, err := lg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range lr.Groups {
		found = found || (g.Group == group && g.GroupType == "consumer")
	}
	if lr.ErrorCode != 0 || !found {
		t.Fatalf("ListGroups v%d (consumer): %+v", lr.Version, lr.Groups)
	}

	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = group, member, -1
	if resp, err = leave.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
		t.Fatalf("leave: %v code %d epoch %d", err, resp.ErrorCode, resp.MemberEpoch)
	}
	// The join's answer carried an assignment: /metrics counts it.
	if v, ok := harness.SumSeries(harness.Scrape(t, b.Admin), "ringlog_consumer_group_assignments_total"); !ok || v < 1 {
		t.Fatalf("ringlog_consumer_group_assignments_total = %v (present %v), want >= 1", v, ok)
	}
}

func smokeAssigned(resp *kmsg.ConsumerGroupHeartbeatResponse) int {
	if resp.Assignment == nil {
		return 0
	}
	n := 0
	for _, t := range resp.Assignment.Topics {
		n += len(t.Partitions)
	}
	return n
}

func smokeStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *s)
}
