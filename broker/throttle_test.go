package broker

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/replication"
)

// throttleImage builds an image through the snapshot decoder, which is how
// a broker sees reassignment state (AddingReplicas) that the controller's
// commands set.
func throttleImage(t *testing.T, topics []metadata.Topic, brokerConfigs []metadata.BrokerConfigSet) *metadata.Image {
	t.Helper()
	b, err := json.Marshal(map[string]any{"Version": 1, "Topics": topics, "BrokerConfigs": brokerConfigs})
	if err != nil {
		t.Fatal(err)
	}
	img, err := metadata.DecodeImage(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestThrottlePlan(t *testing.T) {
	part := func(leader int32, replicas, isr, adding []int32) metadata.Partition {
		return metadata.Partition{Replicas: replicas, ISR: isr, Leader: leader, AddingReplicas: adding}
	}
	topics := []metadata.Topic{
		{ID: metadata.NewUUID(), Name: "listed", Configs: map[string]string{
			"leader.replication.throttled.replicas":   "0:1, 1:3", // names the leader
			"follower.replication.throttled.replicas": "*",
		}, Partitions: []metadata.Partition{
			part(1, []int32{1, 2, 3}, []int32{1, 3}, nil), // 1 leads and is listed: its followers are throttled
			part(2, []int32{2, 1, 3}, []int32{2, 3}, nil), // 1 follows out of the ISR: "*"
			part(2, []int32{2, 3, 1}, []int32{2, 3, 1}, nil),
		}},
		{ID: metadata.NewUUID(), Name: "moving", Partitions: []metadata.Partition{
			part(1, []int32{1, 2, 4}, []int32{1, 2}, []int32{4}), // 4 is being added
			part(2, []int32{2, 3, 1}, []int32{2, 3}, []int32{1}), // 1 is being added
			part(2, []int32{2, 3, 1}, []int32{2, 3}, nil),        // 1 lags, no list, not added: unthrottled
		}},
		{ID: metadata.NewUUID(), Name: "plain", Partitions: []metadata.Partition{part(1, []int32{1, 2}, []int32{1}, nil)}},
		{ID: metadata.NewUUID(), Name: "other-leader", Configs: map[string]string{
			"leader.replication.throttled.replicas": "0:2", // names broker 2, which does not lead it
		}, Partitions: []metadata.Partition{part(1, []int32{1, 2}, []int32{1}, nil)}},
	}
	img := throttleImage(t, topics, []metadata.BrokerConfigSet{
		{Name: "", Configs: map[string]string{"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "2000"}},
		{Name: "1", Configs: map[string]string{"leader.replication.throttled.rate": "4000"}},
	})
	th := newReplThrottle()
	th.sync(img, 1)
	if r := th.leader.Rate(); r != 4000 {
		t.Fatalf("leader rate %d: broker 1's own value wins", r)
	}
	if r := th.follower.Rate(); r != 2000 {
		t.Fatalf("follower rate %d: the cluster default applies", r)
	}
	plan := th.plan.Load()
	lead := func(topic string, p, replica int32) bool {
		r, ok := plan.leader[tpKey{topic, p}]
		return ok && r.has(replica)
	}
	// The ISR check is the leader's, on its live state (LeaderThrottle).
	if !lead("listed", 0, 2) || !lead("listed", 0, 3) || !lead("moving", 0, 4) || lead("moving", 0, 2) || lead("plain", 0, 2) || lead("other-leader", 0, 2) {
		t.Fatalf("leader plan %+v", plan.leader)
	}
	follow := func(topic string, p int32) bool {
		return th.followerThrottled(replication.TopicPartition{Topic: topic, Partition: p})
	}
	if !follow("listed", 1) || follow("listed", 2) || !follow("moving", 1) || follow("moving", 2) || follow("plain", 0) {
		t.Fatalf("follower plan %+v", plan.follower)
	}
	// In the ISR: never throttled on the follower side.
	topics[0].Partitions[1].ISR = []int32{2, 3, 1}
	topics[1].Partitions[1].ISR = []int32{2, 3, 1}
	th.sync(throttleImage(t, topics, nil), 1)
	if follow("listed", 1) || follow("moving", 1) {
		t.Fatalf("in-sync follower throttled: %+v", th.plan.Load().follower)
	}
	if th.leader.Limited() || th.follower.Limited() {
		t.Fatal("rates removed from the image must be unlimited again")
	}
}
