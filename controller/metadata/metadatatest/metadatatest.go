// Package metadatatest builds controller metadata images for the tests of
// other packages (the remote tier's readers and followers need an image
// with topics and committed remote segments), through the same Apply the
// controller uses, so an image a test builds is one the controller could
// have.
package metadatatest

import (
	"testing"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
)

// Builder holds an image and applies commands to it, failing the test on
// a refusal.
type Builder struct {
	t     testing.TB
	Image *metadata.Image
}

// New returns a builder whose image has an initialized cluster with broker
// 1 registered and unfenced (so topics get a leader).
func New(t testing.TB) *Builder {
	t.Helper()
	b := &Builder{t: t, Image: metadata.EmptyImage()}
	b.Apply(metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c"}})
	res := b.Apply(metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c", ID: 1, Incarnation: metadata.NewUUID(),
		Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "localhost", Port: 9092}}}})
	b.Apply(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: 1, Epoch: res.Broker.Epoch}})
	return b
}

// Apply applies c and returns its result; a refusal fails the test.
func (b *Builder) Apply(c metadata.Command) metadata.Result {
	b.t.Helper()
	next, res := b.Image.Apply(b.Image.Index()+1, c)
	if res.Err != nil {
		b.t.Fatalf("metadatatest: applying %+v: %v", c, res.Err)
	}
	b.Image = next
	return res
}

// Topic creates topic name with partitions partitions, each on broker 1
// alone, and returns its id.
func (b *Builder) Topic(name string, partitions int, configs map[string]string) metadata.UUID {
	b.t.Helper()
	id := metadata.NewUUID()
	asg := make([][]int32, partitions)
	for i := range asg {
		asg[i] = []int32{1}
	}
	b.Apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: name, ID: id, Configs: configs, Assignment: asg}})
	return id
}

// CommitRemote commits s as uploaded by the partition's leader in its
// current epoch (s.LeaderEpoch is set to it). Zero Epochs get one entry
// at s.BaseOffset.
func (b *Builder) CommitRemote(s rlm.Segment) {
	b.t.Helper()
	tp, ok := b.Image.TopicByID(metadata.UUID(s.TopicID))
	if !ok || int(s.Partition) >= len(tp.Partitions) {
		b.t.Fatalf("metadatatest: no partition %d of topic %x", s.Partition, s.TopicID)
	}
	s.LeaderEpoch = tp.Partitions[s.Partition].LeaderEpoch
	if len(s.Epochs) == 0 {
		s.Epochs = []epochcache.Entry{{Epoch: s.LeaderEpoch, StartOffset: s.BaseOffset}}
	}
	b.Apply(metadata.Command{CommitRemoteSegment: &metadata.CommitRemoteSegment{Segment: s}})
}
