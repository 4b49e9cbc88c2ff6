package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/sockio"
)

// The controller RPC: each frame is a 4-byte big-endian length and a JSON
// object. A connection carries one call at a time: request frame
// {"Method":..., "Body":...}, then response frame (rpcResponse).

const maxFrame = 16 << 20

func writeFrame(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

func readFrame(r *bufio.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("controller: rpc frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type rpcRequest struct {
	Method string
	Body   json.RawMessage
}

type rpcResponse struct {
	// Err is the text of a known sentinel error (see errorFromWire), or any
	// other text; Msg is the full message.
	Err, Msg string
	// LeaderID/LeaderAddr accompany ErrNotController when the node knows
	// the active controller: the "not controller, leader is X" redirect.
	LeaderID   int32
	LeaderAddr string
	// Index is the raft index a write was applied at, so the caller can
	// wait for its own replica to catch up (read your writes).
	Index uint64
	Body  json.RawMessage
}

// Messages.
type (
	registerReq struct {
		ClusterID      string
		ID             int32
		Incarnation    metadata.UUID
		Endpoints      []metadata.Endpoint
		Rack           string
		ControllerAddr string // raft address for AddNonvoter
	}
	registerResp struct {
		ClusterID string
		Broker    metadata.Broker
	}
	heartbeatReq struct {
		ID           int32
		Epoch        uint64
		AppliedIndex uint64
	}
	heartbeatResp struct {
		Fenced bool
		// CommitIndex is the index of the last metadata entry the
		// controller had applied when it handled the heartbeat (its
		// image's, not raft's commit index; the name is the wire's): the
		// broker's image is fresh as of the send time once it has applied
		// that far. Raft's commit index may end in a barrier or no-op
		// entry, whose commit followers hear of only at the next
		// AppendEntries, up to twice raft's CommitTimeout later.
		CommitIndex uint64
	}
	alterReq      struct{ metadata.AlterPartition }
	partitionResp struct{ Partition metadata.Partition }
	topicResp     struct{ Topic metadata.Topic }
	electReq      struct{ metadata.ElectLeader }
	shutdownReq   struct {
		ID    int32
		Epoch uint64
	}
	pidReq     struct{ metadata.AllocateProducerIDs }
	offlineReq struct{ metadata.ReplicaOffline }
	pidResp    struct{ Start int64 }
	deleteReq  struct{ Name string }
	partsReq   struct {
		Name       string
		Total      int32
		Assignment [][]int32 // optional manual assignment of the new partitions
	}
	emptyResp struct{}
)

// wireErrors are the errors that survive a round trip with errors.Is.
var wireErrors = append([]error{ErrNotController, ErrClosed, ErrInvalidRequest, ErrNoSpace}, metadata.Errors...)

func errorToWire(err error, resp *rpcResponse) {
	resp.Msg = err.Error()
	for _, e := range wireErrors {
		if errors.Is(err, e) {
			resp.Err = e.Error()
			return
		}
	}
	resp.Err = resp.Msg
}

func errorFromWire(resp *rpcResponse) error {
	if resp.Err == "" {
		return nil
	}
	for _, e := range wireErrors {
		if e.Error() == resp.Err {
			if resp.Msg == resp.Err {
				return e
			}
			return fmt.Errorf("%w: %s", e, resp.Msg)
		}
	}
	return errors.New(resp.Msg)
}

// handler runs one RPC on this node. It returns a redirect (via ErrNotController)
// when this node is not the active controller.
type handler func(n *Node, ctx context.Context, body json.RawMessage) (any, uint64, error)

func h[Req any](f func(n *Node, ctx context.Context, req *Req) (any, uint64, error)) handler {
	return func(n *Node, ctx context.Context, body json.RawMessage) (any, uint64, error) {
		var req Req
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
		return f(n, ctx, &req)
	}
}

var handlers = map[string]handler{
	"Register":                    h((*Node).handleRegister),
	"Heartbeat":                   h((*Node).handleHeartbeat),
	"AlterPartition":              h((*Node).handleAlterPartition),
	"CreateTopic":                 h((*Node).handleCreateTopic),
	"DeleteTopic":                 h((*Node).handleDeleteTopic),
	"CreatePartitions":            h((*Node).handleCreatePartitions),
	"ElectLeader":                 h((*Node).handleElectLeader),
	"AllocateProducerIDs":         h((*Node).handleAllocateProducerIDs),
	"ReplicaOffline":              h((*Node).handleReplicaOffline),
	"ReadIndex":                   h((*Node).handleReadIndex),
	"ControlledShutdown":          h((*Node).handleControlledShutdown),
	"AlterScramCredentials":       h((*Node).handleAlterScram),
	"CreateACLs":                  h((*Node).handleCreateACLs),
	"DeleteACLs":                  h((*Node).handleDeleteACLs),
	"AlterConfigs":                h((*Node).handleAlterConfigs),
	"AlterClientQuotas":           h((*Node).handleAlterClientQuotas),
	"AlterPartitionReassignments": h((*Node).handleAlterReassignments),
	"UnregisterBroker":            h((*Node).handleUnregisterBroker),
	"CommitRemoteSegment":         h((*Node).handleCommitRemote),
	"DeleteRemoteSegments":        h((*Node).handleDeleteRemote),
	"RemoteTopicPurged":           h((*Node).handleRemotePurged),
}

// serveRPC answers calls on one connection until it closes.
func (n *Node) serveRPC(c net.Conn) {
	if !n.trackConn(c) {
		c.Close()
		return
	}
	defer n.untrackConn(c)
	defer c.Close()
	// The listener opens before raft exists (raft's transport needs it);
	// a peer's call arriving in that window waits for raft.
	select {
	case <-n.raftReady:
	case <-n.ctx.Done():
		return
	}
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		var req rpcRequest
		if err := readFrame(r, &req); err != nil {
			return
		}
		var resp rpcResponse
		f, ok := handlers[req.Method]
		if !ok {
			errorToWire(fmt.Errorf("%w: unknown method %q", ErrInvalidRequest, req.Method), &resp)
		} else {
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
			body, idx, err := f(n, ctx, req.Body)
			cancel()
			resp.Index = idx
			if err != nil {
				errorToWire(err, &resp)
				if errors.Is(err, ErrNotController) {
					resp.LeaderID, resp.LeaderAddr = n.controller()
				}
			} else if resp.Body, err = json.Marshal(body); err != nil {
				errorToWire(err, &resp)
			}
		}
		if err := writeFrame(w, &resp); err != nil {
			return
		}
	}
}

// rpcClient calls the active controller, following redirects. Idle
// connections are kept per address.
type rpcClient struct {
	n    *Node
	dial func(ctx context.Context, addr string) (net.Conn, error)
	idle chan idleConn // small pool shared by all addresses
}

type idleConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func tcpDial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c = sockio.Wrap(c)
	if _, err := c.Write([]byte{protoRPC}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (cl *rpcClient) get(ctx context.Context, addr string) (idleConn, error) {
	for range cap(cl.idle) {
		select {
		case ic := <-cl.idle:
			if ic.addr == addr {
				return ic, nil
			}
			ic.c.Close()
		default:
		}
	}
	c, err := cl.dial(ctx, addr)
	if err != nil {
		return idleConn{}, err
	}
	return idleConn{addr: addr, c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

func (cl *rpcClient) put(ic idleConn) {
	select {
	case cl.idle <- ic:
	default:
		ic.c.Close()
	}
}

func (cl *rpcClient) closeIdle() {
	for {
		select {
		case ic := <-cl.idle:
			ic.c.Close()
		default:
			return
		}
	}
}

// callOnce makes one call to addr.
func (cl *rpcClient) callOnce(ctx context.Context, addr string, req *rpcRequest) (*rpcResponse, error) {
	ic, err := cl.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * cl.n.cfg.ApplyTimeout)
	}
	_ = ic.c.SetDeadline(deadline)
	var resp rpcResponse
	if err := writeFrame(ic.w, req); err != nil {
		ic.c.Close()
		return nil, err
	}
	if err := readFrame(ic.r, &resp); err != nil {
		ic.c.Close()
		return nil, err
	}
	_ = ic.c.SetDeadline(time.Time{})
	cl.put(ic)
	return &resp, nil
}

// call sends method to the active controller and decodes the reply into
// out. It follows "not controller, leader is X" redirects and, while no
// leader is known, tries the voters in turn, until ctx ends. It returns
// the raft index the controller reported.
func (cl *rpcClient) call(ctx context.Context, method string, in, out any) (uint64, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req := &rpcRequest{Method: method, Body: body}
	var target string
	next := 0
	var lastErr error
	for attempt := 0; ; attempt++ {
		if target == "" {
			// Prefer who our own raft thinks leads, else round-robin.
			if _, addr := cl.n.controller(); addr != "" && attempt%2 == 0 {
				target = addr
			} else {
				addrs := cl.n.voterAddrs()
				target = addrs[next%len(addrs)]
				next++
			}
		}
		resp, err := cl.callOnce(ctx, target, req)
		switch {
		case err != nil:
			lastErr, target = err, ""
		case resp.Err == ErrNotController.Error():
			lastErr = errorFromWire(resp)
			target = resp.LeaderAddr
			if target != "" && attempt < 3 {
				continue // fresh redirect: follow it at once
			}
		default:
			if err := errorFromWire(resp); err != nil {
				return resp.Index, err
			}
			if out != nil {
				if err := json.Unmarshal(resp.Body, out); err != nil {
					return resp.Index, err
				}
			}
			return resp.Index, nil
		}
		// No leader known or the target is down: back off briefly.
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("controller: %s: %w (last error: %v)", method, ctx.Err(), lastErr)
		case <-cl.n.ctx.Done():
			return 0, ErrClosed
		case <-time.After(cl.n.retryBackoff()):
		}
	}
}
