package metadata

import (
	"maps"
	"slices"
	"sort"
)

// Image is an immutable view of the cluster metadata after the entry at
// Index() was applied. Apply returns a new Image and never changes the old
// one (copy-on-write: untouched topics and brokers are shared), so any
// number of goroutines may read an Image without locks. Slices and maps
// reachable from returned values are shared: do not modify them.
type Image struct {
	index          uint64
	clusterID      string
	brokers        map[int32]*Broker
	topics         map[string]*Topic
	topicNames     map[UUID]string
	nextProducerID int64
	// scram and acls are replaced whole on change (security.go).
	scram map[ScramKey]ScramCredential
	acls  []ACL // sorted by compareACL
	// brokerConfigs are the dynamic broker configs by broker id ("" =
	// cluster-wide default), replaced whole on change (configs.go).
	brokerConfigs map[string]map[string]string
	// groupConfigs are the dynamic group configs (Kafka's GROUP config
	// resource) by group id, replaced whole on change (configs.go).
	groupConfigs map[string]map[string]string
	// quotas is replaced whole on change (quotas.go).
	quotas map[QuotaEntity]map[string]float64
	// remote is the remote-log metadata by topic id, one entry per
	// partition (nil: none), copied per topic and partition on change;
	// remotePurge lists deleted topics whose objects remain, sorted
	// (remote.go).
	remote      map[UUID][]*remoteLog
	remotePurge []UUID
}

// EmptyImage is the state before the first log entry.
func EmptyImage() *Image {
	return &Image{
		brokers:    map[int32]*Broker{},
		topics:     map[string]*Topic{},
		topicNames: map[UUID]string{},
	}
}

// Index is the raft index of the last entry applied to this image.
func (im *Image) Index() uint64 { return im.index }

// ClusterID is "" until the first controller leader fixed it.
func (im *Image) ClusterID() string { return im.clusterID }

// NextProducerID is the first id of the next block AllocateProducerIDs
// hands out.
func (im *Image) NextProducerID() int64 { return im.nextProducerID }

// Broker returns the registered broker with id.
func (im *Image) Broker(id int32) (Broker, bool) {
	b, ok := im.brokers[id]
	if !ok {
		return Broker{}, false
	}
	return *b, true
}

// Brokers returns every registered broker, fenced or not, sorted by id.
func (im *Image) Brokers() []Broker {
	out := make([]Broker, 0, len(im.brokers))
	for _, id := range slices.Sorted(maps.Keys(im.brokers)) {
		out = append(out, *im.brokers[id])
	}
	return out
}

// Topic returns the topic named name.
func (im *Image) Topic(name string) (Topic, bool) {
	t, ok := im.topics[name]
	if !ok {
		return Topic{}, false
	}
	return *t, true
}

// TopicByID returns the topic with id.
func (im *Image) TopicByID(id UUID) (Topic, bool) {
	name, ok := im.topicNames[id]
	if !ok {
		return Topic{}, false
	}
	return im.Topic(name)
}

// Topics returns every topic sorted by name.
func (im *Image) Topics() []Topic {
	out := make([]Topic, 0, len(im.topics))
	for _, t := range im.topics {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Partition returns one partition of a topic.
func (im *Image) Partition(topic string, p int32) (Partition, bool) {
	t, ok := im.topics[topic]
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return Partition{}, false
	}
	return t.Partitions[p], true
}

// LeaderCounts returns, per broker, how many partitions name it as
// preferred leader (Replicas[0]); placement balances on it.
func (im *Image) LeaderCounts() map[int32]int {
	out := map[int32]int{}
	for _, t := range im.topics {
		for _, p := range t.Partitions {
			if len(p.Replicas) > 0 {
				out[p.Replicas[0]]++
			}
		}
	}
	return out
}

// txn builds the next image. Maps of the base image are cloned at most once
// and only when written.
type txn struct {
	im                          *Image
	brokersCloned, topicsCloned bool
	remoteCloned                bool
}

func (im *Image) begin(index uint64) *txn {
	next := *im
	next.index = index
	return &txn{im: &next}
}

func (t *txn) putBroker(b *Broker) {
	if !t.brokersCloned {
		t.im.brokers = maps.Clone(t.im.brokers)
		t.brokersCloned = true
	}
	t.im.brokers[b.ID] = b
}

func (t *txn) cloneTopicMaps() {
	if !t.topicsCloned {
		t.im.topics = maps.Clone(t.im.topics)
		t.im.topicNames = maps.Clone(t.im.topicNames)
		t.topicsCloned = true
	}
}

func (t *txn) putTopic(tp *Topic) {
	t.cloneTopicMaps()
	t.im.topics[tp.Name] = tp
	t.im.topicNames[tp.ID] = tp.Name
}

func (t *txn) deleteTopic(tp *Topic) {
	t.cloneTopicMaps()
	delete(t.im.topics, tp.Name)
	delete(t.im.topicNames, tp.ID)
}

// unfenced reports whether broker id is registered and not fenced in the
// image being built.
func (t *txn) unfenced(id int32) bool {
	b, ok := t.im.brokers[id]
	return ok && !b.Fenced
}
