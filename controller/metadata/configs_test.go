package metadata

import (
	"bytes"
	"maps"
	"testing"
)

func TestAlterTopicConfigs(t *testing.T) {
	m, _, _, tid := newMachineWithTopicA(t)
	alter := func(c AlterConfigs) Command { c.Kind = ConfigTopic; return Command{AlterConfigs: &c} }
	topicCfg := func() map[string]string {
		tp, _ := m.img.Topic("a")
		return tp.Configs
	}
	m.ok(alter(AlterConfigs{Name: "a", TopicID: tid, Set: map[string]string{"retention.ms": "1000", "min.insync.replicas": "2"}}))
	m.ok(alter(AlterConfigs{Name: "a", Set: map[string]string{"retention.ms": "2000"}, Delete: []string{"min.insync.replicas"}}))
	if got := topicCfg(); !maps.Equal(got, map[string]string{"retention.ms": "2000"}) {
		t.Fatalf("after incremental changes: %v", got)
	}
	// Replace (AlterConfigs) drops what it does not name.
	m.ok(alter(AlterConfigs{Name: "a", Replace: true, Set: map[string]string{"segment.bytes": "1048576"}}))
	if got := topicCfg(); !maps.Equal(got, map[string]string{"segment.bytes": "1048576"}) {
		t.Fatalf("after replace: %v", got)
	}
	m.ok(alter(AlterConfigs{Name: "a", Replace: true}))
	if got := topicCfg(); got == nil || len(got) != 0 {
		t.Fatalf("after empty replace: %v", got)
	}
	m.reject(alter(AlterConfigs{Name: "nope", Set: map[string]string{"retention.ms": "1"}}), ErrUnknownTopic)
	m.reject(alter(AlterConfigs{Name: "a", TopicID: NewUUID(), Set: map[string]string{"retention.ms": "1"}}), ErrUnknownTopic)
	m.reject(alter(AlterConfigs{Name: "a", Set: map[string]string{"": "1"}}), ErrInvalidCommand)
	m.reject(Command{AlterConfigs: &AlterConfigs{Kind: "client", Name: "g"}}, ErrInvalidCommand)

	// A deleted topic takes its configs along; the re-created one starts
	// clean.
	m.ok(alter(AlterConfigs{Name: "a", Set: map[string]string{"retention.ms": "5"}}))
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "a"}})
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: NewUUID(), Assignment: [][]int32{{1}}}})
	if got := topicCfg(); len(got) != 0 {
		t.Fatalf("re-created topic inherited configs %v", got)
	}
}

func TestAlterBrokerConfigsAndSnapshot(t *testing.T) {
	m := newMachine(t)
	alter := func(c AlterConfigs) Command { c.Kind = ConfigBroker; return Command{AlterConfigs: &c} }
	m.ok(alter(AlterConfigs{Name: "", Set: map[string]string{"log.retention.ms": "100"}}))
	m.ok(alter(AlterConfigs{Name: "1", Set: map[string]string{"min.insync.replicas": "2"}}))
	if got := m.img.BrokerConfigs(""); !maps.Equal(got, map[string]string{"log.retention.ms": "100"}) {
		t.Fatalf("default broker configs %v", got)
	}
	if got := m.img.BrokerConfigs("1"); got["min.insync.replicas"] != "2" {
		t.Fatalf("broker 1 configs %v", got)
	}
	m.reject(alter(AlterConfigs{Name: "x"}), ErrInvalidCommand)
	m.reject(alter(AlterConfigs{Name: "01"}), ErrInvalidCommand)
	m.reject(alter(AlterConfigs{Name: "-1"}), ErrInvalidCommand)

	// Survives a snapshot round trip, and Equal sees the difference.
	var buf bytes.Buffer
	if err := m.img.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	restored, err := DecodeImage(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !restored.Equal(m.img) {
		t.Fatal("restored image differs")
	}
	m.ok(alter(AlterConfigs{Name: "1", Delete: []string{"min.insync.replicas"}}))
	if m.img.BrokerConfigs("1") != nil || len(m.img.BrokerConfigNames()) != 1 {
		t.Fatalf("emptied resource kept: %v", m.img.BrokerConfigNames())
	}
	if restored.Equal(withIndex(m.img, restored.Index())) {
		t.Fatal("Equal ignores broker configs")
	}
	// A snapshot written before dynamic configs existed still restores.
	old := []byte(`{"Version":1,"Index":3,"ClusterID":"c1","NextProducerID":0,"Brokers":[],"Topics":[]}`)
	if im, err := DecodeImage(bytes.NewReader(old)); err != nil || len(im.BrokerConfigNames()) != 0 {
		t.Fatalf("old snapshot: %v", err)
	}
}

func TestAlterGroupConfigs(t *testing.T) {
	m, _, _, _ := newMachineWithTopicA(t)
	alter := func(c AlterConfigs) Command { c.Kind = ConfigGroup; return Command{AlterConfigs: &c} }
	m.ok(alter(AlterConfigs{Name: "g", Set: map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"}}))
	m.ok(alter(AlterConfigs{Name: "g", Delete: []string{"share.record.lock.duration.ms"}}))
	if got := m.img.GroupConfigs("g"); !maps.Equal(got, map[string]string{"share.auto.offset.reset": "earliest"}) {
		t.Fatalf("group configs %v", got)
	}
	m.reject(alter(AlterConfigs{Name: ""}), ErrInvalidCommand)
	// Group configs survive a snapshot.
	var b bytes.Buffer
	if err := m.img.Encode(&b); err != nil {
		t.Fatal(err)
	}
	im, err := DecodeImage(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !im.Equal(m.img) || !maps.Equal(im.GroupConfigs("g"), m.img.GroupConfigs("g")) {
		t.Fatal("group configs lost in the snapshot")
	}
	m.ok(alter(AlterConfigs{Name: "g", Replace: true}))
	if m.img.GroupConfigs("g") != nil {
		t.Fatal("empty replace kept the group's configs")
	}
}
