package broker

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
)

// TestTopicView checks the consumer protocol's topic view: lookups by
// name and id, internal topics left out of AllTopics, the cached list
// following image changes, and concurrent use (run with -race).
func TestTopicView(t *testing.T) {
	img := metadata.EmptyImage()
	apply := func(c metadata.Command) metadata.Result {
		t.Helper()
		next, res := img.Apply(img.Index()+1, c)
		if res.Err != nil {
			t.Fatalf("apply: %v", res.Err)
		}
		img = next
		return res
	}
	apply(metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c1"}})
	reg := apply(metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c1", ID: 1, Incarnation: metadata.UUID{1},
		Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092}}}})
	apply(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: 1, Epoch: reg.Broker.Epoch}})
	idA, idOffsets := metadata.UUID{0xa}, metadata.UUID{0xc}
	apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "a", ID: idA, Assignment: [][]int32{{1}, {1}}}})
	apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: group.OffsetsTopic, ID: idOffsets, Assignment: [][]int32{{1}}}})

	var cur atomic.Pointer[metadata.Image]
	cur.Store(img)
	v := &topicView{image: cur.Load}
	want := group.TopicInfo{Name: "a", ID: group.TopicID(idA), Partitions: 2}
	if got, ok := v.TopicByName("a"); !ok || got != want {
		t.Fatalf("TopicByName: %+v %v", got, ok)
	}
	if got, ok := v.TopicByID(group.TopicID(idA)); !ok || got != want {
		t.Fatalf("TopicByID: %+v %v", got, ok)
	}
	if _, ok := v.TopicByName("missing"); ok {
		t.Fatal("found a missing topic")
	}
	if got, ok := v.TopicByID(group.TopicID(idOffsets)); !ok || got.Name != group.OffsetsTopic {
		t.Fatal("lookups must still find internal topics")
	}
	all := v.AllTopics()
	if len(all) != 1 || all[0] != want {
		t.Fatalf("AllTopics: %+v", all)
	}
	all[0].Name = "scribbled" // the caller owns the slice
	if v.AllTopics()[0] != want {
		t.Fatal("AllTopics handed out its cache")
	}

	// A new image (a topic created) replaces the cached list.
	apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "b", ID: metadata.UUID{0xb}, Assignment: [][]int32{{1}}}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				v.AllTopics()
				v.TopicByName("b")
			}
		}()
	}
	cur.Store(img)
	wg.Wait()
	if all := v.AllTopics(); len(all) != 2 || all[1].Name != "b" {
		t.Fatalf("AllTopics after a create: %+v", all)
	}
	// No image yet (before Start): nothing, no panic.
	empty := &topicView{image: func() *metadata.Image { return nil }}
	if _, ok := empty.TopicByName("a"); ok || empty.AllTopics() != nil {
		t.Fatal("a view without an image found topics")
	}
}
