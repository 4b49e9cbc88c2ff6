package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// FSM adapts Image to raft.FSM. raft calls Apply, Snapshot and Restore from
// one goroutine; Image, Changed and WaitIndex may be called from any.
type FSM struct {
	mu      sync.Mutex // guards img and changed; held only to swap them
	img     *Image
	changed chan struct{}
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an FSM holding the empty image.
func NewFSM() *FSM {
	return &FSM{img: EmptyImage(), changed: make(chan struct{})}
}

// Image returns the current immutable image.
func (f *FSM) Image() *Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img
}

// Changed returns a channel that is closed at the next apply or restore.
// Read Image after it fires, then call Changed again: a new channel is made
// for every change, so no change is missed between the two calls as long as
// Changed is called before Image.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *FSM) publish(img *Image) {
	f.mu.Lock()
	f.img = img
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Apply decodes and applies one log entry. It returns a *Result whose Err
// says whether the command was rejected; undecodable entries are rejected
// the same way (never a panic) so one bad entry cannot stop every replica.
func (f *FSM) Apply(l *raft.Log) any {
	img := f.Image()
	var res Result
	if c, err := DecodeCommand(l.Data); err != nil {
		next := *img
		next.index = l.Index
		img, res = &next, Result{Index: l.Index, Err: err}
	} else {
		img, res = img.Apply(l.Index, c)
	}
	f.publish(img)
	return &res
}

// snapshotVersion is the first field of every snapshot; Restore refuses
// others. Version 2 added the remote-log metadata; version 1 snapshots
// (no remote state) still load.
const (
	snapshotVersion       = 2
	oldestSnapshotVersion = 1
)

// snapshotV1 is the JSON snapshot: lists sorted by id/name so that equal
// images encode to equal bytes.
type snapshotV1 struct {
	Version        int
	Index          uint64
	ClusterID      string
	NextProducerID int64
	Brokers        []Broker
	Topics         []Topic
	// Added later; absent in older snapshots.
	Scram []ScramCredential `json:",omitempty"`
	ACLs  []ACL             `json:",omitempty"`
	// Dynamic broker configs (configs.go); absent in older snapshots.
	BrokerConfigs []BrokerConfigSet `json:",omitempty"`
	// Dynamic group configs (configs.go; Name is the group id); absent
	// in older snapshots.
	GroupConfigs []BrokerConfigSet `json:",omitempty"`
	// Client quotas; absent in older snapshots.
	Quotas []ClientQuota `json:",omitempty"`
	// Remote-log metadata (remote.go); version 2 on.
	Remote      []remotePartitionSnap `json:",omitempty"`
	RemotePurge []UUID                `json:",omitempty"`
}

// Encode writes the image as a versioned JSON snapshot.
func (im *Image) Encode(w io.Writer) error {
	return json.NewEncoder(w).Encode(snapshotV1{
		Version:        snapshotVersion,
		Index:          im.index,
		ClusterID:      im.clusterID,
		NextProducerID: im.nextProducerID,
		Brokers:        im.Brokers(),
		Topics:         im.Topics(),
		Scram:          im.ScramCredentials(),
		ACLs:           im.acls,
		BrokerConfigs:  im.brokerConfigSets(),
		GroupConfigs:   im.groupConfigSets(),
		Quotas:         im.ClientQuotas(),
		Remote:         im.remoteSnap(),
		RemotePurge:    im.remotePurge,
	})
}

// DecodeImage reads a snapshot written by Encode.
func DecodeImage(r io.Reader) (*Image, error) {
	var s snapshotV1
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("metadata: decode snapshot: %w", err)
	}
	if s.Version < oldestSnapshotVersion || s.Version > snapshotVersion {
		return nil, fmt.Errorf("metadata: snapshot version %d, want %d to %d", s.Version, oldestSnapshotVersion, snapshotVersion)
	}
	im := EmptyImage()
	im.index, im.clusterID, im.nextProducerID = s.Index, s.ClusterID, s.NextProducerID
	if len(s.Scram) > 0 {
		im.scram = make(map[ScramKey]ScramCredential, len(s.Scram))
		for _, c := range s.Scram {
			im.scram[ScramKey{c.User, c.Mechanism}] = c
		}
	}
	im.acls = s.ACLs
	for _, bc := range s.BrokerConfigs {
		if im.brokerConfigs == nil {
			im.brokerConfigs = map[string]map[string]string{}
		}
		if bc.Configs == nil {
			bc.Configs = map[string]string{}
		}
		im.brokerConfigs[bc.Name] = bc.Configs
	}
	for _, gc := range s.GroupConfigs {
		if im.groupConfigs == nil {
			im.groupConfigs = map[string]map[string]string{}
		}
		im.groupConfigs[gc.Name] = gc.Configs
	}
	if len(s.Quotas) > 0 {
		im.quotas = make(map[QuotaEntity]map[string]float64, len(s.Quotas))
		for _, q := range s.Quotas {
			im.quotas[q.Entity] = q.Values
		}
	}
	for i := range s.Brokers {
		b := s.Brokers[i]
		im.brokers[b.ID] = &b
	}
	for i := range s.Topics {
		t := s.Topics[i]
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		for j := range t.Partitions {
			// JSON turns empty slices into null; keep restored images equal
			// to the ones apply builds.
			if t.Partitions[j].ISR == nil {
				t.Partitions[j].ISR = []int32{}
			}
		}
		im.topics[t.Name] = &t
		im.topicNames[t.ID] = t.Name
	}
	if err := im.restoreRemote(s.Remote, s.RemotePurge); err != nil {
		return nil, err
	}
	return im, nil
}

// Snapshot captures the current image; it is immutable, so Persist may run
// concurrently with later applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return fsmSnapshot{f.Image()}, nil
}

// Restore replaces the state with a snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	im, err := DecodeImage(rc)
	if err != nil {
		return err
	}
	f.publish(im)
	return nil
}

type fsmSnapshot struct{ img *Image }

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.img.Encode(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

// Equal reports whether two images hold the same state (used by tests and
// by anyone checking a restore).
func (im *Image) Equal(o *Image) bool {
	if im.index != o.index || im.clusterID != o.clusterID || im.nextProducerID != o.nextProducerID ||
		len(im.brokers) != len(o.brokers) || len(im.topics) != len(o.topics) ||
		len(im.scram) != len(o.scram) || !slices.Equal(im.acls, o.acls) || len(im.quotas) != len(o.quotas) ||
		!equalBrokerConfigs(im.brokerConfigs, o.brokerConfigs) || !equalBrokerConfigs(im.groupConfigs, o.groupConfigs) || !equalRemote(im, o) {
		return false
	}
	for e, v := range im.quotas {
		if ov, ok := o.quotas[e]; !ok || !maps.Equal(v, ov) {
			return false
		}
	}
	for k, c := range im.scram {
		oc, ok := o.scram[k]
		if !ok || c.Iterations != oc.Iterations || !bytes.Equal(c.Salt, oc.Salt) ||
			!bytes.Equal(c.StoredKey, oc.StoredKey) || !bytes.Equal(c.ServerKey, oc.ServerKey) {
			return false
		}
	}
	for id, b := range im.brokers {
		ob, ok := o.brokers[id]
		if !ok || b.ID != ob.ID || b.Incarnation != ob.Incarnation || b.Epoch != ob.Epoch ||
			b.Rack != ob.Rack || b.Fenced != ob.Fenced || !slices.Equal(b.Endpoints, ob.Endpoints) {
			return false
		}
	}
	for name, t := range im.topics {
		ot, ok := o.topics[name]
		if !ok || t.ID != ot.ID || len(t.Configs) != len(ot.Configs) || len(t.Partitions) != len(ot.Partitions) {
			return false
		}
		for k, v := range t.Configs {
			if ov, ok := ot.Configs[k]; !ok || ov != v {
				return false
			}
		}
		for i, p := range t.Partitions {
			op := ot.Partitions[i]
			if p.Leader != op.Leader || p.LeaderEpoch != op.LeaderEpoch || p.PartitionEpoch != op.PartitionEpoch ||
				!slices.Equal(p.Replicas, op.Replicas) || !slices.Equal(p.ISR, op.ISR) || !slices.Equal(p.Offline, op.Offline) ||
				!slices.Equal(p.AddingReplicas, op.AddingReplicas) || !slices.Equal(p.RemovingReplicas, op.RemovingReplicas) {
				return false
			}
		}
	}
	return true
}
