package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// UnregisterBroker removes a broker's registration (Kafka's
// UnregisterBroker, KIP-631). Unlike Kafka, which drops any registration,
// it is refused while the broker is unfenced (still running: stop it
// first, ErrBrokerRunning) and while any replica list names it
// (ErrBrokerHasReplicas: decommission it first), so no partition is ever
// assigned to a broker that is not registered. A process that starts
// again with this id simply registers again.
type UnregisterBroker struct {
	ID int32
}

func (t *txn) unregisterBroker(c *UnregisterBroker) Result {
	b, ok := t.im.brokers[c.ID]
	if !ok {
		return Result{Err: fmt.Errorf("%w: broker %d", ErrUnknownBroker, c.ID)}
	}
	if !b.Fenced {
		return Result{Err: fmt.Errorf("%w: broker %d is unfenced (its process is running and heartbeating); stop it, then unregister", ErrBrokerRunning, c.ID)}
	}
	var hosted []string
	n := 0
	for _, name := range slices.Sorted(maps.Keys(t.im.topics)) {
		for i, p := range t.im.topics[name].Partitions {
			if contains(p.Replicas, c.ID) {
				if n < 5 {
					hosted = append(hosted, fmt.Sprintf("%s-%d", name, i))
				}
				n++
			}
		}
	}
	if n > 0 {
		more := ""
		if n > len(hosted) {
			more = fmt.Sprintf(" and %d more", n-len(hosted))
		}
		return Result{Err: fmt.Errorf("%w: broker %d is still a replica of %d partitions (%s%s); move them off first (ringlog admin decommission)",
			ErrBrokerHasReplicas, c.ID, n, strings.Join(hosted, ", "), more)}
	}
	out := *b
	if !t.brokersCloned {
		t.im.brokers = maps.Clone(t.im.brokers)
		t.brokersCloned = true
	}
	delete(t.im.brokers, c.ID)
	return Result{Broker: &out}
}
