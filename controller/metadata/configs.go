package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Dynamic configs (Kafka's IncrementalAlterConfigs and AlterConfigs) are
// replicated like every other metadata change: a topic's overrides live in
// Topic.Configs (so DeleteTopic drops them and a re-created topic starts
// clean), dynamic broker configs in the image's broker config map, keyed
// by broker id ("0", "1", ...) or "" for the cluster-wide default. Values
// are validated by the proposer (netpath, against the engine's parser);
// the state machine only checks the resource exists, so it stays free of
// config semantics and every replica applies the same way.

// ConfigResource kinds, as Kafka's ConfigResourceType names them.
const (
	ConfigTopic  = "topic"
	ConfigBroker = "broker"
	ConfigGroup  = "group"
)

// AlterConfigs changes the dynamic configs of one resource. With Replace
// (AlterConfigs) Set becomes the whole dynamic set; otherwise
// (IncrementalAlterConfigs) Set is merged in and Delete removed. APPEND and
// SUBTRACT are resolved by the proposer into Set values.
type AlterConfigs struct {
	Kind string // ConfigTopic, ConfigBroker or ConfigGroup
	// Name is the topic name, the broker id in decimal ("" = the
	// cluster-wide default for every broker), or the group id.
	Name string
	// TopicID, when set, must be the topic's id: a change computed against
	// a topic that was deleted and re-created meanwhile is rejected.
	TopicID UUID              `json:",omitempty"`
	Replace bool              `json:",omitempty"`
	Set     map[string]string `json:",omitempty"`
	Delete  []string          `json:",omitempty"`
}

// BrokerConfigs returns the dynamic configs of broker name ("" = the
// cluster-wide default); nil when none are set. Do not modify the map.
func (im *Image) BrokerConfigs(name string) map[string]string {
	return im.brokerConfigs[name]
}

// GroupConfigs returns the dynamic configs of group id; nil when none are
// set. Do not modify the map.
func (im *Image) GroupConfigs(id string) map[string]string {
	return im.groupConfigs[id]
}

// BrokerConfigNames returns the resource names that have dynamic broker
// configs, sorted ("" first).
func (im *Image) BrokerConfigNames() []string {
	return slices.Sorted(maps.Keys(im.brokerConfigs))
}

// mergeConfigs returns base with c's change applied, as a new map.
func mergeConfigs(base map[string]string, c *AlterConfigs) map[string]string {
	var out map[string]string
	if c.Replace {
		out = maps.Clone(c.Set)
	} else {
		out = maps.Clone(base)
		if out == nil {
			out = map[string]string{}
		}
		for _, k := range c.Delete {
			delete(out, k)
		}
		maps.Copy(out, c.Set)
	}
	if out == nil {
		out = map[string]string{}
	}
	return out
}

func (t *txn) alterConfigs(c *AlterConfigs) Result {
	for k := range c.Set {
		if k == "" {
			return Result{Err: fmt.Errorf("%w: empty config name", ErrInvalidCommand)}
		}
	}
	switch c.Kind {
	case ConfigTopic:
		tp, ok := t.im.topics[c.Name]
		if !ok || (!c.TopicID.IsZero() && tp.ID != c.TopicID) {
			return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)}
		}
		nt := *tp
		nt.Configs = mergeConfigs(tp.Configs, c)
		t.putTopic(&nt)
		out := nt
		return Result{Topic: &out}
	case ConfigBroker:
		if c.Name != "" {
			id, err := strconv.ParseInt(c.Name, 10, 32)
			if err != nil || id < 0 || strconv.FormatInt(id, 10) != c.Name {
				return Result{Err: fmt.Errorf("%w: broker resource %q", ErrInvalidCommand, c.Name)}
			}
		}
		next := mergeConfigs(t.im.brokerConfigs[c.Name], c)
		bc := maps.Clone(t.im.brokerConfigs)
		if bc == nil {
			bc = map[string]map[string]string{}
		}
		if len(next) == 0 {
			delete(bc, c.Name)
		} else {
			bc[c.Name] = next
		}
		t.im.brokerConfigs = bc
		return Result{}
	case ConfigGroup:
		if c.Name == "" {
			return Result{Err: fmt.Errorf("%w: empty group id", ErrInvalidCommand)}
		}
		next := mergeConfigs(t.im.groupConfigs[c.Name], c)
		gc := maps.Clone(t.im.groupConfigs)
		if gc == nil {
			gc = map[string]map[string]string{}
		}
		if len(next) == 0 {
			delete(gc, c.Name)
		} else {
			gc[c.Name] = next
		}
		t.im.groupConfigs = gc
		return Result{}
	}
	return Result{Err: fmt.Errorf("%w: config resource kind %q", ErrInvalidCommand, c.Kind)}
}

// BrokerConfigSet is one resource's dynamic broker configs in a snapshot.
type BrokerConfigSet struct {
	Name    string // broker id, or "" for the cluster-wide default
	Configs map[string]string
}

func (im *Image) brokerConfigSets() []BrokerConfigSet {
	var out []BrokerConfigSet
	for _, n := range im.BrokerConfigNames() {
		out = append(out, BrokerConfigSet{Name: n, Configs: im.brokerConfigs[n]})
	}
	return out
}

func (im *Image) groupConfigSets() []BrokerConfigSet {
	var out []BrokerConfigSet
	for _, n := range slices.Sorted(maps.Keys(im.groupConfigs)) {
		out = append(out, BrokerConfigSet{Name: n, Configs: im.groupConfigs[n]})
	}
	return out
}

func equalBrokerConfigs(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}
