package netpath

import (
	"github.com/ringlog/ringlog/coordinator/metadata"
	"strconv"

	"github.com/ringlog/ringlog/engine"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behavior:
//   - Topic resources (from the metadata image, so any broker answers)
//     list every supported topic config with its effective
//     value; source is TOPIC_CONFIG when set on the topic, DEFAULT_CONFIG
//     otherwise (v0: is_default).
//   - Broker resources (name = this node id, or empty) list the broker
//     settings that clients commonly look at.
//   - config_names filters; null means all.
//   - Other resource types get INVALID_REQUEST.

func init() { register(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		want := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		add := func(name, value string, isDefault, readOnly, sensitive bool, source kmsg.ConfigSource) {
			if !want(name) {
				return
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = name
			v := value
			c.Value = &v
			c.IsDefault = isDefault
			c.ReadOnly = readOnly
			c.IsSensitive = sensitive
			c.Source = source
			sr.Configs = append(sr.Configs, c)
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if !s.authorize(r, metadata.OpDescribeConfigs, metadata.ResourceTopic, rr.ResourceName) {
				sr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			t, ok := s.node.MetadataImage().Topic(rr.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			cfg, err := s.engine.ParseConfig(t.Configs)
			if err != nil {
				sr.ErrorCode = errorCode(err)
				break
			}
			for _, e := range cfg.Entries() {
				src := kmsg.ConfigSourceDynamicTopicConfig
				if e.IsDefault {
					src = kmsg.ConfigSourceDefaultConfig
				}
				add(e.Name, e.Value, e.IsDefault, e.ReadOnly, e.Sensitive, src)
			}
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "this broker is node " + strconv.Itoa(int(s.cfg.NodeID))
				sr.ErrorMessage = &msg
				break
			}
			src := kmsg.ConfigSourceStaticBrokerConfig
			add("broker.id", strconv.Itoa(int(s.cfg.NodeID)), false, true, false, src)
			add("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), false, true, false, src)
			add("num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions)), false, true, false, src)
			add("socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxRequestBytes)), false, true, false, src)
			for _, e := range engine.DefaultTopicConfig().Entries() {
				add("log."+e.Name, e.Value, e.IsDefault, true, e.Sensitive, kmsg.ConfigSourceDefaultConfig)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return immediate(resp)
}
