package controller

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/hashicorp/raft"
)

// memNet is an in-process network for tests and single-node mode: raft's
// in-memory transports connected pairwise, and RPC connections made with
// net.Pipe straight into the target node's RPC server. Everything above the
// dial is the same code as over TCP.
type memNet struct {
	mu    sync.Mutex
	trans map[string]*raft.InmemTransport
	nodes map[string]*Node
}

func newMemNet() *memNet {
	return &memNet{trans: map[string]*raft.InmemTransport{}, nodes: map[string]*Node{}}
}

// join connects addr's transport to every other one.
func (m *memNet) join(addr string, n *Node) *raft.InmemTransport {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, t := raft.NewInmemTransport(raft.ServerAddress(addr))
	for a, o := range m.trans {
		t.Connect(raft.ServerAddress(a), o)
		o.Connect(raft.ServerAddress(addr), t)
	}
	m.trans[addr] = t
	m.nodes[addr] = n
	return t
}

// leave disconnects addr, as if its process died.
func (m *memNet) leave(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.trans[addr]
	if !ok {
		return
	}
	delete(m.trans, addr)
	delete(m.nodes, addr)
	t.DisconnectAll()
	for _, o := range m.trans {
		o.Disconnect(raft.ServerAddress(addr))
	}
}

func (m *memNet) dial(_ context.Context, addr string) (net.Conn, error) {
	m.mu.Lock()
	n, ok := m.nodes[addr]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("memnet: no node at %s", addr)
	}
	c, s := net.Pipe()
	go n.serveRPC(s)
	return c, nil
}
