package controller

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
)

func TestFenceTick(t *testing.T) {
	for _, c := range []struct{ hb, session, want time.Duration }{
		{100 * time.Millisecond, 3 * time.Second, 50 * time.Millisecond},        // half the heartbeat
		{1 * time.Second, 3 * time.Second, 150 * time.Millisecond},              // a twentieth of the session
		{100 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond}, // floor
	} {
		if got := fenceTick(c.hb, c.session); got != c.want {
			t.Errorf("fenceTick(%v, %v) = %v, want %v", c.hb, c.session, got, c.want)
		}
	}
}

func ids(bs []metadata.Broker) []int32 {
	var out []int32
	for _, b := range bs {
		out = append(out, b.ID)
	}
	slices.Sort(out)
	return out
}

// A new controller gives every broker of the image a full session from its
// election: heartbeats seen in an earlier term count for nothing, a broker
// silent since before the election is fenced a session after it (not
// earlier, and not a tick later), a fenced one is left alone, and one the
// image shows only later starts its session when first checked.
func TestSessionsStartAtElection(t *testing.T) {
	const session = 3 * time.Second
	n := &Node{cfg: Config{BrokerSessionTimeout: session}}
	t0 := time.Unix(1_800_000_000, 0)
	brokers := []metadata.Broker{{ID: 1}, {ID: 2}, {ID: 3, Fenced: true}}

	// This node led before and saw broker 1 an hour ago; leadership moved
	// away (no brokers: not leading) and back at t0.
	n.startSessions(brokers, t0.Add(-2*time.Hour))
	n.lastSeen[1] = t0.Add(-time.Hour)
	n.startSessions(nil, t0.Add(-time.Minute))
	if len(n.lastSeen) != 0 {
		t.Fatalf("a node that stopped leading kept sessions: %v", n.lastSeen)
	}
	n.startSessions(brokers, t0)
	if got := n.expiredSessions(brokers, t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("expired a second after the election: %v", ids(got))
	}
	if got := n.expiredSessions(brokers, t0.Add(session)); len(got) != 0 {
		t.Fatalf("expired at exactly a session after the election: %v", ids(got))
	}
	if got := ids(n.expiredSessions(brokers, t0.Add(session+time.Millisecond))); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("a session after the election: expired %v, want [1 2] (3 is fenced already)", got)
	}

	// A heartbeat after the election extends only that broker's session.
	n.startSessions(brokers, t0)
	n.lmu.Lock()
	n.lastSeen[2] = t0.Add(time.Second)
	n.lmu.Unlock()
	if got := ids(n.expiredSessions(brokers, t0.Add(session+time.Millisecond))); !slices.Equal(got, []int32{1}) {
		t.Fatalf("expired %v, want [1]", got)
	}

	// Broker 4 registered after the election: its session starts at the
	// first check that sees it.
	later := append(slices.Clone(brokers), metadata.Broker{ID: 4})
	t1 := t0.Add(10 * time.Second)
	n.startSessions(brokers, t0)
	if got := ids(n.expiredSessions(later, t1)); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("expired %v at the first check that sees broker 4, want [1 2]", got)
	}
	if got := ids(n.expiredSessions(later, t1.Add(session))); slices.Contains(got, 4) {
		t.Fatalf("broker 4 expired a session after it was first seen, not after: %v", got)
	}
	if got := ids(n.expiredSessions(later, t1.Add(session+time.Millisecond))); !slices.Contains(got, 4) {
		t.Fatalf("broker 4 not expired after its session: %v", got)
	}
}

// Before the leadership notification is handled there are no sessions,
// and nothing expires.
func TestSessionsBeforeNotification(t *testing.T) {
	n := &Node{cfg: Config{BrokerSessionTimeout: time.Second}}
	if got := n.expiredSessions([]metadata.Broker{{ID: 1}}, time.Now().Add(time.Hour)); len(got) != 0 {
		t.Fatalf("expired %v with no sessions started", ids(got))
	}
}

// A fenced broker is unfenced without waiting for raft's CommitTimeout:
// the catch-up target is the controller's last metadata entry, whose
// commit the barrier after it carries at once, not raft's commit index,
// which ends in that barrier (followers hear of its commit only at the
// next AppendEntries, up to twice CommitTimeout later).
func TestUnfenceNotPacedByCommitTimeout(t *testing.T) {
	const commitTimeout = 5 * time.Second
	_, nodes := memCluster(t, 3, func(c *Config) {
		tune := c.raftTune
		c.raftTune = func(rc *raft.Config) {
			tune(rc)
			rc.CommitTimeout = commitTimeout
		}
	})
	l := leaderOf(t, nodes)
	victim := otherThan(nodes, l)
	victim.pauseHeartbeats.Store(true)
	checkFor(t, victim.cfg.BrokerSessionTimeout+5*time.Second, func() error {
		if b, _ := l.MetadataImage().Broker(victim.NodeID()); !b.Fenced {
			return errors.New("not fenced yet")
		}
		return nil
	})
	victim.pauseHeartbeats.Store(false)
	start := time.Now()
	checkFor(t, 2*commitTimeout, func() error { return victim.Fresh() })
	if took := time.Since(start); took > commitTimeout/2 {
		t.Fatalf("unfenced %v after heartbeats resumed (CommitTimeout %v)", took, commitTimeout)
	}
}
