package netpath

import (
	"context"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: v0-2
//
// Behavior:
//   - Needs ALTER on the cluster when the authorizer is on; otherwise every
//     requested partition, and the top level (v1+), is
//     CLUSTER_AUTHORIZATION_FAILED.
//   - election_type 0 (always, in v0) elects the preferred replica
//     (the first of the replica list) when it is unfenced and in the ISR:
//     ELECTION_NOT_NEEDED when it leads already,
//     PREFERRED_LEADER_NOT_AVAILABLE otherwise. The controller also does
//     this by itself every --leader-rebalance-interval.
//   - election_type 1 (unclean) elects only for a partition without a live
//     leader: its first live ISR member, else any live replica, and then
//     what only the old ISR held is lost. Kafka allows it as an explicit
//     operator action; each one is logged at ERROR. ELECTION_NOT_NEEDED
//     when the leader is live, ELIGIBLE_LEADERS_NOT_AVAILABLE when no
//     replica is. Other types are INVALID_REQUEST.
//   - A null topic list means every partition, and, as in Kafka, the
//     partitions that need no election are left out of the answer.
//   - Each election goes through the active controller from any broker;
//     the answer comes once this broker's image has it. Unknown topics and
//     partitions are UNKNOWN_TOPIC_OR_PARTITION; what the request's timeout
//     leaves undone is REQUEST_TIMED_OUT.

func init() { register(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := controller.ElectionType(req.ElectionType)
	if req.Version == 0 {
		typ = controller.PreferredElection
	}
	allowed := s.authorizeCluster(r, metadata.OpAlter)
	return reply{resolve: func(<-chan struct{}) *response {
		topLevel := int16(0)
		switch {
		case !allowed:
			topLevel = kerr.ClusterAuthorizationFailed.Code
		case typ != controller.PreferredElection && typ != controller.UncleanElection:
			topLevel = kerr.InvalidRequest.Code
		}
		if req.Version >= 1 {
			resp.ErrorCode = topLevel
		}
		ctx, cancel := s.adminContext(req.TimeoutMillis)
		defer cancel()
		all := req.Topics == nil
		topics := req.Topics
		if all && topLevel == 0 {
			// Every partition: decide which need an election from an
			// image that has what the controller applied.
			if err := s.node.Sync(ctx); err != nil {
				s.log.Warn("elect leaders: metadata read barrier", "err", err)
			}
			topics = electionCandidates(s.node.MetadataImage(), typ)
		}
		type tp struct {
			topic string
			part  int32
		}
		seen := map[tp]bool{}
		// A topic named twice gets one answer: kadm keeps only the last
		// entry per topic.
		at := map[string]int{}
		for _, rt := range topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, part := range rt.Partitions {
				if seen[tp{rt.Topic, part}] {
					continue
				}
				seen[tp{rt.Topic, part}] = true
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition = part
				code, msg := topLevel, (*string)(nil)
				if code == 0 {
					code, msg = s.electLeader(ctx, r, rt.Topic, part, typ)
				}
				if all && code == kerr.ElectionNotNeeded.Code {
					continue
				}
				sp.ErrorCode, sp.ErrorMessage = code, msg
				st.Partitions = append(st.Partitions, sp)
			}
			switch i, ok := at[rt.Topic]; {
			case ok:
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, st.Partitions...)
			case !all || len(st.Partitions) > 0:
				at[rt.Topic] = len(resp.Topics)
				resp.Topics = append(resp.Topics, st)
			}
		}
		return &response{msg: resp}
	}}
}

// electionCandidates lists the partitions of img that may need an
// election of type typ: preferred, those not led by their preferred
// replica; unclean, those without a live leader.
func electionCandidates(img *metadata.Image, typ controller.ElectionType) []kmsg.ElectLeadersRequestTopic {
	var out []kmsg.ElectLeadersRequestTopic
	for _, t := range img.Topics() {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = t.Name
		for i, p := range t.Partitions {
			need := false
			if typ == controller.PreferredElection {
				need = len(p.Replicas) > 0 && p.Leader != p.Replicas[0]
			} else {
				b, ok := img.Broker(p.Leader)
				need = !ok || b.Fenced
			}
			if need {
				rt.Partitions = append(rt.Partitions, int32(i))
			}
		}
		if len(rt.Partitions) > 0 {
			out = append(out, rt)
		}
	}
	return out
}

// electLeader runs one election and returns its error code and message.
func (s *Server) electLeader(ctx context.Context, r *request, topic string, part int32, typ controller.ElectionType) (int16, *string) {
	if ctx.Err() != nil {
		msg := "request timed out before this election was started"
		return kerr.RequestTimedOut.Code, &msg
	}
	before, _ := s.node.MetadataImage().Partition(topic, part)
	p, err := s.node.ElectLeader(ctx, topic, part, typ)
	if err != nil {
		return errorCode(err), errorMessage(err)
	}
	if typ == controller.UncleanElection {
		s.log.Error("UNCLEAN LEADER ELECTION requested through ElectLeaders: a partition without a live leader got one; if it was not in sync, records acknowledged by the old ISR are lost",
			"topic", topic, "partition", part, "leader", p.Leader, "leader_epoch", p.LeaderEpoch,
			"old_isr", before.ISR, "isr", p.ISR, "principal", r.conn.principal())
	} else {
		s.log.Info("preferred leader elected through ElectLeaders", "topic", topic, "partition", part,
			"old_leader", before.Leader, "leader", p.Leader, "leader_epoch", p.LeaderEpoch, "principal", r.conn.principal())
	}
	return 0, nil
}
