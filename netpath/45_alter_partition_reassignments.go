package netpath

import (
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments: v0
//
// Behavior:
//   - Each partition's replicas are its new target (preferred leader
//     first); null replicas cancel the reassignment in progress. All of
//     it goes to the controller as one metadata command
//     (controller/metadata/reassign.go); each partition succeeds or
//     fails on its own.
//   - The new replicas copy the log through the ordinary follower path
//     and join the ISR; then the replicas not in the target leave, and
//     leadership moves off a removed leader. A target that adds nothing
//     (a reorder, or a subset of the ISR) completes at once.
//   - UNKNOWN_TOPIC_OR_PARTITION for an unknown partition;
//     INVALID_REPLICA_ASSIGNMENT for an empty target, a broker named
//     twice, or one that is not registered and unfenced;
//     NO_REASSIGNMENT_IN_PROGRESS for a cancel with none in progress.
//   - Needs ALTER on the cluster when the authorizer is on
//     (CLUSTER_AUTHORIZATION_FAILED, top level and per partition).
//   - v1 (KIP-860, allow_replication_factor_change) is not served.

func init() { register(45, 0, 0, handleAlterPartitionReassignments) }

// maxReassignItemsPerCommand bounds one metadata entry (a few hundred
// bytes per item).
const maxReassignItemsPerCommand = 1000

func handleAlterPartitionReassignments(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowed := s.authorizeCluster(r, metadata.OpAlter)
	return reply{resolve: func(<-chan struct{}) *response {
		var cmd metadata.AlterPartitionReassignments
		type slot struct{ t, p int }
		var at []slot // response partition of each command item
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				if allowed {
					cmd.Items = append(cmd.Items, metadata.ReassignmentItem{
						Topic: rt.Topic, Partition: rp.Partition, Replicas: rp.Replicas, Cancel: rp.Replicas == nil,
					})
					at = append(at, slot{len(resp.Topics), len(st.Partitions)})
				} else {
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !allowed {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return &response{msg: resp}
		}
		if len(cmd.Items) == 0 {
			return &response{msg: resp}
		}
		ctx, cancel := s.adminContext(req.TimeoutMillis)
		// Items are independent: a large request becomes several metadata
		// entries of bounded size rather than one huge one.
		var errs []error
		var err error
		for items := range slices.Chunk(cmd.Items, maxReassignItemsPerCommand) {
			var es []error
			es, err = s.node.AlterPartitionReassignments(ctx, metadata.AlterPartitionReassignments{Items: items})
			if err != nil {
				break
			}
			errs = append(errs, es...)
		}
		cancel()
		if err != nil && len(errs) == 0 {
			// No controller, timeout, before anything was applied: the
			// request fails as a whole (and each item with it); later,
			// only the items not applied fail.
			msg := err.Error()
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), &msg
		}
		for i, a := range at {
			e := err
			if i < len(errs) {
				e = errs[i]
			}
			if e != nil {
				msg := e.Error()
				sp := &resp.Topics[a.t].Partitions[a.p]
				sp.ErrorCode, sp.ErrorMessage = errorCode(e), &msg
			}
		}
		if len(errs) > 0 {
			if rerr := s.cluster.Reconcile(); rerr != nil {
				s.log.Warn("reconcile after partition reassignment", "err", rerr)
			}
			s.log.Info("partition reassignments altered", "partitions", len(errs), "not_applied", len(cmd.Items)-len(errs), "err", err)
		}
		return &response{msg: resp}
	}}
}
