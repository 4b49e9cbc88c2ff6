package group

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Partition sets and subscription resolution of the consumer protocol.

// tpKey names one partition by topic id.
type tpKey struct {
	id TopicID
	p  int32
}

func (a Assignment) each(f func(tpKey)) {
	for id, ps := range a {
		for _, p := range ps {
			f(tpKey{id, p})
		}
	}
}

func (a Assignment) has(k tpKey) bool {
	_, ok := slices.BinarySearch(a[k.id], k.p)
	return ok
}

func (a Assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// assignmentOf builds a sorted, duplicate-free Assignment from keys.
func assignmentOf(keys []tpKey) Assignment {
	out := make(Assignment)
	for _, k := range keys {
		out[k.id] = append(out[k.id], k.p)
	}
	for id, ps := range out {
		slices.Sort(ps)
		out[id] = slices.Compact(ps)
	}
	return out
}

// normalize copies a (from the wire or an assignor) into the canonical
// form: sorted, without duplicates or empty topics.
func normalize(a Assignment) Assignment {
	var keys []tpKey
	a.each(func(k tpKey) { keys = append(keys, k) })
	return assignmentOf(keys)
}

func equalAssignment(a, b Assignment) bool {
	return a.size() == b.size() && subset(a, b)
}

// subset reports whether every partition of a is in b.
func subset(a, b Assignment) bool {
	ok := true
	a.each(func(k tpKey) {
		if ok && !b.has(k) {
			ok = false
		}
	})
	return ok
}

// intersects reports whether a and b share a partition.
func intersects(a, b Assignment) bool {
	hit := false
	a.each(func(k tpKey) {
		if !hit && b.has(k) {
			hit = true
		}
	})
	return hit
}

func cloneAssignment(a Assignment) Assignment {
	out := make(Assignment, len(a))
	for id, ps := range a {
		out[id] = slices.Clone(ps)
	}
	return out
}

// compileRegex compiles a subscription regex the way Kafka's RE2J matches
// it: against the whole topic name.
func compileRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + re + ")$")
}

// regexCache holds the topics each regex of a group matches, valid while
// the cluster's topic set (fingerprint) is unchanged, so a heartbeat does
// not match every regex against every topic.
type regexCache struct {
	fingerprint uint64
	matches     map[string][]string // regex -> sorted topic names
}

// topicSetFingerprint is order-independent (a sum of per-topic hashes),
// so it costs one pass without sorting; ids are included so that a
// topic deleted and recreated under its name counts as a change.
func topicSetFingerprint(all []TopicInfo) uint64 {
	sum := uint64(len(all))
	for _, t := range all {
		h := fnv.New64a()
		h.Write([]byte(t.Name))
		h.Write(t.ID[:])
		sum += h.Sum64()
	}
	return sum
}

// resolver resolves subscriptions through one Topics view for the length
// of one operation.
type resolver struct {
	topics Topics
	cache  *regexCache
	all    []TopicInfo // fetched at most once
}

// regexTopics returns the names regex matches (it compiled at join).
func (r *resolver) regexTopics(re string) []string {
	if r.all == nil {
		r.all = r.topics.AllTopics()
		if r.all == nil {
			r.all = []TopicInfo{}
		}
		fp := topicSetFingerprint(r.all)
		if r.cache.matches == nil || r.cache.fingerprint != fp {
			r.cache.fingerprint, r.cache.matches = fp, make(map[string][]string)
		}
	}
	if m, ok := r.cache.matches[re]; ok {
		return m
	}
	var names []string
	if rx, err := compileRegex(re); err == nil {
		for _, t := range r.all {
			if rx.MatchString(t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	slices.Sort(names)
	r.cache.matches[re] = names
	return names
}

// memberTopics resolves a member's subscription to the existing topics,
// sorted by name, without duplicates.
func (r *resolver) memberTopics(mem *cmember) []TopicInfo {
	names := slices.Clone(mem.names)
	if mem.regex != nil {
		names = append(names, r.regexTopics(*mem.regex)...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]TopicInfo, 0, len(names))
	for _, n := range names {
		if t, ok := r.topics.TopicByName(n); ok && t.Partitions > 0 {
			out = append(out, t)
		}
	}
	return out
}

// groupTopics resolves the union of every member's subscription.
func (r *resolver) groupTopics(cg *cgroup) []TopicInfo {
	set := make(map[string]bool)
	for _, mem := range cg.members {
		for _, n := range mem.names {
			set[n] = true
		}
		if mem.regex != nil {
			for _, n := range r.regexTopics(*mem.regex) {
				set[n] = true
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]TopicInfo, 0, len(names))
	for _, n := range names {
		if t, ok := r.topics.TopicByName(n); ok && t.Partitions > 0 {
			out = append(out, t)
		}
	}
	return out
}

// metadataHash fingerprints the subscribed topics (id, name, partition
// count); a change means the target assignment is out of date.
func metadataHash(ts []TopicInfo) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range ts {
		h.Write(t.ID[:])
		h.Write([]byte(t.Name))
		binary.BigEndian.PutUint32(b[:], uint32(t.Partitions))
		h.Write(b[:])
	}
	return h.Sum64()
}

// covers reports whether target assigns exactly the partitions of ts: what
// the assignors guarantee for an up-to-date target.
func covers(target map[string]Assignment, ts []TopicInfo) bool {
	want := 0
	byID := make(map[TopicID]int32, len(ts))
	for _, t := range ts {
		want += int(t.Partitions)
		byID[t.ID] = t.Partitions
	}
	got := 0
	for _, a := range target {
		for id, ps := range a {
			n, ok := byID[id]
			if !ok {
				return false
			}
			for _, p := range ps {
				if p < 0 || p >= n {
					return false
				}
			}
			got += len(ps)
		}
	}
	return got == want
}

func compareTopicID(a, b TopicID) int { return bytes.Compare(a[:], b[:]) }

// chooseAssignor picks the group's assignor: the one most members name
// (ties to the earlier in Config.ConsumerAssignors), the configured
// default when none names one. Kafka picks the most used one as well.
func (g *group) chooseAssignor() string {
	cfg := g.m.cfg.ConsumerAssignors
	votes := make(map[string]int)
	for _, mem := range g.consumer.members {
		if mem.assignor != nil {
			votes[*mem.assignor]++
		}
	}
	best, n := cfg[0], 0
	for _, name := range cfg {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

// computeTarget runs the assignor over every member and installs the new
// target at the group epoch, returning the target records (changed
// members, then the target metadata), in Kafka's order.
func (g *group) computeTarget(r *resolver) ([]statelog.KV, error) {
	cg := g.consumer
	name := g.chooseAssignor()
	a, ok := g.m.assignorFor(name)
	if !ok {
		return nil, errAssignorMissing(name)
	}
	spec := &AssignSpec{Topics: make(map[TopicID]TopicInfo)}
	ids := cg.memberIDs()
	for _, id := range ids {
		mem := cg.members[id]
		ts := r.memberTopics(mem)
		sub := make([]TopicID, 0, len(ts))
		for _, t := range ts {
			sub = append(sub, t.ID)
			spec.Topics[t.ID] = t
		}
		slices.SortFunc(sub, compareTopicID)
		spec.Members = append(spec.Members, AssignMember{
			MemberID: id, InstanceID: mem.instanceID, RackID: mem.rackID,
			Subscribed: sub, Current: cg.target[id],
		})
	}
	res := a.Assign(spec)
	var kvs []statelog.KV
	for _, id := range ids {
		next := g.validTarget(res[id], spec.Topics)
		if !equalAssignment(next, cg.target[id]) || cg.target[id] == nil {
			kvs = append(kvs, g.m.crec.targetMember(g.id, id, next, false))
		}
		cg.target[id] = next
	}
	cg.assignEpoch = cg.epoch
	cg.assignor = name
	kvs = append(kvs, g.m.crec.targetMeta(g.id, cg.assignEpoch, false))
	return kvs, nil
}

// validTarget drops from an assignor's answer anything outside the
// subscribed topics, so a faulty assignor cannot hand out partitions that
// do not exist.
func (g *group) validTarget(a Assignment, topics map[TopicID]TopicInfo) Assignment {
	var keys []tpKey
	a.each(func(k tpKey) {
		if t, ok := topics[k.id]; ok && k.p >= 0 && k.p < t.Partitions {
			keys = append(keys, k)
		}
	})
	return assignmentOf(keys)
}

// namesOf turns an assignment into topic names for the classic
// DescribeGroups blobs; unknown topic ids are left out.
func namesOf(a Assignment, topics Topics) ([]string, map[string][]int32) {
	byName := make(map[string][]int32)
	if topics == nil {
		return nil, byName
	}
	for id, ps := range a {
		if t, ok := topics.TopicByID(id); ok {
			byName[t.Name] = ps
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.SortFunc(names, strings.Compare)
	return names, byName
}
