package netpath

import (
	"context"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments: v0
//
// Behavior:
//   - Lists the partitions in reassignment with their full replica set
//     (target first, then the replicas being removed), the adding and the
//     removing replicas; null topics list every one. A named partition
//     that is not being reassigned, or does not exist, is left out (as
//     Kafka does).
//   - Read from this broker's metadata image after a (bounded) read
//     barrier, so a reassignment just made through another broker shows.
//   - Needs DESCRIBE on the cluster when the authorizer is on
//     (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.authorizeCluster(r, metadata.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return immediate(resp)
	}
	return reply{resolve: func(<-chan struct{}) *response {
		ctx, cancel := context.WithTimeout(s.ctx, min(2*time.Second, s.cfg.AdminTimeout))
		_ = s.node.Sync(ctx) // stale is still an answer: the image we have
		cancel()
		var want map[string]map[int32]bool // nil: every partition
		if req.Topics != nil {
			want = map[string]map[int32]bool{}
			for _, t := range req.Topics {
				if want[t.Topic] == nil {
					want[t.Topic] = map[int32]bool{}
				}
				for _, p := range t.Partitions {
					want[t.Topic][p] = true
				}
			}
		}
		byTopic := map[string]int{}
		for _, ra := range s.node.MetadataImage().Reassignments() {
			if want != nil && !want[ra.Topic][ra.Partition] {
				continue
			}
			i, ok := byTopic[ra.Topic]
			if !ok {
				st := kmsg.NewListPartitionReassignmentsResponseTopic()
				st.Topic = ra.Topic
				i = len(resp.Topics)
				byTopic[ra.Topic] = i
				resp.Topics = append(resp.Topics, st)
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = ra.Partition
			sp.Replicas = append([]int32(nil), ra.Replicas...)
			sp.AddingReplicas = append([]int32{}, ra.Adding...)
			sp.RemovingReplicas = append([]int32{}, ra.Removing...)
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
		}
		return &response{msg: resp}
	}}
}
