package netpath

import (
	"fmt"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4
//
// Behavior:
//   - Key type 0 (group): the coordinator is the leader of the group's
//     __consumer_offsets partition (statelog.PartitionFor). The topic is
//     created through the controller on first use; while a partition has
//     no leader, or this broker's metadata may be stale, the answer is
//     COORDINATOR_NOT_AVAILABLE so the client retries.
//   - Key type 1 (transaction): the leader of the transactional id's
//     __transaction_state partition (txn.PartitionFor), the topic created
//     on first use in the same way. An empty id is INVALID_REQUEST; other
//     key types too. With ACLs on it needs DESCRIBE on the id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//   - v4 batches keys (KIP-699); v0-3 carry one.
//   - Runs in resolve (the writer goroutine): creating the offsets topic
//     waits for the controller without blocking the connection's reads.

func init() { register(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	return reply{resolve: func(<-chan struct{}) *response {
		ctx, cancel := s.adminContext(0)
		defer cancel()
		for _, key := range keys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port = key, -1, -1
			var err error
			switch req.CoordinatorType {
			case 0:
				if key == "" {
					c.ErrorCode, err = kerr.InvalidGroupID.Code, group.ErrInvalidGroupID
					break
				}
				if !s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, key) {
					err = errGroupAuthz
					c.ErrorCode = errorCode(err)
					break
				}
				id, cerr := s.groups.Coordinator(ctx, key)
				c.ErrorCode, err = s.fillCoordinator(&c, r.conn.l, id, cerr)
			case 1:
				if key == "" {
					err = fmt.Errorf("%w: empty transactional id", txn.ErrInvalidRequest)
					c.ErrorCode = errorCode(err)
					break
				}
				if !s.authorize(r, metadata.OpDescribe, metadata.ResourceTransactionalID, key) {
					err = errTxnIDAuthz
					c.ErrorCode = errorCode(err)
					break
				}
				id, cerr := s.txns.Coordinator(ctx, key)
				c.ErrorCode, err = s.fillCoordinator(&c, r.conn.l, id, cerr)
			default:
				c.ErrorCode = kerr.InvalidRequest.Code
			}
			if err != nil && c.ErrorMessage == nil {
				c.ErrorMessage = errorMessage(err)
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		if req.Version < 4 && len(resp.Coordinators) == 1 {
			c := resp.Coordinators[0]
			resp.Coordinators = nil
			resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		}
		return &response{msg: resp}
	}}
}

// fillCoordinator puts coordinator broker id's endpoint for the request's
// listener into c; a failure to find one is COORDINATOR_NOT_AVAILABLE
// (retriable) with the reason.
func (s *Server) fillCoordinator(c *kmsg.FindCoordinatorResponseCoordinator, l *listener, id int32, err error) (int16, error) {
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, err
	}
	for _, be := range s.liveBrokers(s.node.MetadataImage(), l) {
		if be.id == id {
			c.NodeID, c.Host, c.Port = be.id, be.host, be.port
			return 0, nil
		}
	}
	return kerr.CoordinatorNotAvailable.Code, fmt.Errorf("coordinator broker %d is not available", id)
}
