package metadata

import (
	"bytes"
	"strings"
	"testing"
)

func TestUnregisterBroker(t *testing.T) {
	m, _, _, _ := newMachineWithTopicA(t) // topic a on 1, 2, 3
	e4 := m.register(4, "")
	m.reject(Command{UnregisterBroker: &UnregisterBroker{ID: 9}}, ErrUnknownBroker)
	// Running (unfenced): refused.
	m.reject(Command{UnregisterBroker: &UnregisterBroker{ID: 4}}, ErrBrokerRunning)
	// Fenced but a replica of a-0: refused, naming the partition.
	b3, _ := m.img.Broker(3)
	m.ok(Command{FenceBroker: &FenceBroker{ID: 3, Epoch: b3.Epoch}})
	res := m.apply(Command{UnregisterBroker: &UnregisterBroker{ID: 3}})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "a-0") {
		t.Fatalf("unregister of a replica host: %v, want ErrBrokerHasReplicas naming a-0", res.Err)
	}
	m.reject(Command{UnregisterBroker: &UnregisterBroker{ID: 3}}, ErrBrokerHasReplicas)

	// Stopped and empty: removed.
	m.ok(Command{FenceBroker: &FenceBroker{ID: 4, Epoch: e4}})
	before := m.img
	res = m.ok(Command{UnregisterBroker: &UnregisterBroker{ID: 4}})
	if res.Broker == nil || res.Broker.ID != 4 {
		t.Fatalf("result broker %+v", res.Broker)
	}
	if _, ok := m.img.Broker(4); ok {
		t.Fatal("broker 4 still registered")
	}
	if _, ok := before.Broker(4); !ok {
		t.Fatal("apply modified the previous image")
	}
	if len(m.img.Brokers()) != 3 {
		t.Fatalf("brokers %v", m.img.Brokers())
	}
	// Unregistering twice is BROKER_ID_NOT_REGISTERED.
	m.reject(Command{UnregisterBroker: &UnregisterBroker{ID: 4}}, ErrUnknownBroker)

	// The removal survives a snapshot.
	var buf bytes.Buffer
	if err := m.img.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeImage(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(m.img) {
		t.Fatal("restored image differs")
	}
	if _, ok := got.Broker(4); ok {
		t.Fatal("broker 4 back after restore")
	}
	// A process starting again with the id registers again.
	m.register(4, "")
	if b, ok := m.img.Broker(4); !ok || b.Fenced {
		t.Fatalf("re-registered broker 4: %+v %v", b, ok)
	}
}

// An old log (without the field) still decodes; a command with it
// round-trips.
func TestUnregisterBrokerEncoding(t *testing.T) {
	c, err := DecodeCommand(append([]byte{commandVersion}, `{"UnregisterBroker":{"ID":5}}`...))
	if err != nil || c.UnregisterBroker == nil || c.UnregisterBroker.ID != 5 {
		t.Fatalf("decode: %+v %v", c, err)
	}
	if _, err := DecodeCommand(append([]byte{commandVersion}, `{"FenceBroker":{"ID":5,"Epoch":3}}`...)); err != nil {
		t.Fatal(err)
	}
}
