package netpath

import (
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v0-4
//
// Behavior:
//   - One log dir: the broker's data directory, with its file system's
//     total and usable bytes (v4+, statfs).
//   - Per hosted partition, leader or follower: size is the bytes of its
//     segment files (.log, as Kafka's log size), offset_lag is
//     max(0, high watermark - log end offset) as Kafka reports for a
//     current (non-future) replica, is_future is false (no future
//     replicas: alter-replica-log-dirs is not served).
//   - topics null: every hosted partition; otherwise only the listed
//     topics and partitions this broker hosts (others are left out, as
//     in Kafka).
//   - With an authorizer, DESCRIBE on the CLUSTER: otherwise no dirs and
//     CLUSTER_AUTHORIZATION_FAILED (top level, v3+).
//   - v5 (is_cordoned) is not served.

func init() { register(35, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizeCluster(r, metadata.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return immediate(resp)
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.engine.Dir()
	if free, total, err := s.engine.DiskUsage(); err == nil {
		dir.TotalBytes, dir.UsableBytes = total, free
	} else {
		dir.TotalBytes, dir.UsableBytes = -1, -1
	}
	// wanted reports whether topic/idx was asked for.
	var want map[string][]int32
	if req.Topics != nil {
		want = make(map[string][]int32, len(req.Topics))
		for _, rt := range req.Topics {
			want[rt.Topic] = append(want[rt.Topic], rt.Partitions...)
		}
	}
	for _, ti := range s.engine.Topics() {
		asked, ok := want[ti.Name]
		if want != nil && !ok {
			continue
		}
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = ti.Name
		for _, idx := range s.engine.Hosted(ti.Name) {
			if want != nil && !slices.Contains(asked, idx) {
				continue
			}
			part, err := s.engine.Partition(ti.Name, idx)
			if err != nil {
				continue // dropped meanwhile
			}
			info := part.Info()
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition = idx
			dp.Size = part.Size()
			dp.OffsetLag = max(0, info.HighWatermark-info.LogEndOffset)
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return immediate(resp)
}
