package netpath

import (
	"maps"
	"slices"
	"strconv"

	"github.com/ringlog/ringlog/controller/metadata"

	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/engine"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behavior:
//   - Topic resources (from the metadata image, so any broker answers)
//     list every supported topic config with its effective value and
//     source: DYNAMIC_TOPIC_CONFIG when set on the topic, else the source
//     of the broker-level value in force (DYNAMIC_BROKER_CONFIG for this
//     broker's dynamic config, DYNAMIC_DEFAULT_BROKER_CONFIG for the
//     cluster-wide one, STATIC_BROKER_CONFIG for a flag, DEFAULT_CONFIG);
//     v0 has only is_default. include_synonyms (v1+) lists every level
//     that has a value, highest precedence first.
//   - Broker resources named this node id list the broker settings that
//     clients commonly look at (read-only) and the dynamic broker configs
//     with their sources; the empty name lists the cluster-wide dynamic
//     defaults only, as Kafka does. Another broker's id is INVALID_REQUEST.
//   - Group resources (share groups' settings, GROUP_CONFIG when set on
//     the group, else the broker's default) list share.GroupConfigKeys.
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
		add := func(name, value string, isDefault, readOnly, sensitive bool, source kmsg.ConfigSource, syns []configSynonym) {
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
			if req.IncludeSynonyms {
				for _, sy := range syns {
					cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					sv := sy.value
					cs.Name, cs.Value, cs.Source = sy.name, &sv, sy.source
					c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
				}
			}
			sr.Configs = append(sr.Configs, c)
		}
		img := s.node.MetadataImage()
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
			cfg, err := engine.ParseTopicConfig(s.defaultsFor(img), t.Configs)
			if err != nil {
				sr.ErrorCode = errorCode(err)
				break
			}
			for _, e := range cfg.Entries() {
				var syns []configSynonym
				if v, ok := t.Configs[e.Name]; ok {
					syns = append(syns, configSynonym{e.Name, v, kmsg.ConfigSourceDynamicTopicConfig})
				}
				if bk, ok := engine.BrokerKeyFor(e.Name); ok {
					syns = append(syns, s.brokerKeySynonyms(img, bk, e.Name)...)
				}
				src := kmsg.ConfigSourceDefaultConfig
				if len(syns) > 0 {
					src = syns[0].source
				}
				// v0 has only is_default: true when nothing above Kafka's default is set.
				add(e.Name, e.Value, src == kmsg.ConfigSourceDefaultConfig, e.ReadOnly, e.Sensitive, src, syns)
			}
		case kmsg.ConfigResourceTypeBroker:
			if !s.authorizeCluster(r, metadata.OpDescribeConfigs) {
				sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			if rr.ResourceName == "" {
				// The cluster-wide default resource holds only what was
				// set on it.
				def := img.BrokerConfigs("")
				for _, k := range slices.Sorted(maps.Keys(def)) {
					syn := []configSynonym{{k, def[k], kmsg.ConfigSourceDynamicDefaultBrokerConfig}}
					add(k, def[k], false, false, false, kmsg.ConfigSourceDynamicDefaultBrokerConfig, syn)
				}
				break
			}
			if rr.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "this broker is node " + strconv.Itoa(int(s.cfg.NodeID))
				sr.ErrorMessage = &msg
				break
			}
			src := kmsg.ConfigSourceStaticBrokerConfig
			static := func(name, value string) {
				add(name, value, false, true, false, src, []configSynonym{{name, value, src}})
			}
			static("broker.id", strconv.Itoa(int(s.cfg.NodeID)))
			static("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics))
			static("num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions)))
			static("socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxRequestBytes)))
			for _, bk := range engine.DynamicBrokerKeys() {
				tk, _ := engine.TopicKeyFor(bk)
				syns := s.brokerKeySynonyms(img, bk, tk)
				add(bk, syns[0].value, syns[0].source == kmsg.ConfigSourceDefaultConfig, false, false, syns[0].source, syns)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if !s.authorize(r, metadata.OpDescribeConfigs, metadata.ResourceGroup, rr.ResourceName) {
				sr.ErrorCode = kerr.GroupAuthorizationFailed.Code
				break
			}
			dyn := img.GroupConfigs(rr.ResourceName)
			gc := s.shares.GroupConfig(rr.ResourceName)
			for _, k := range share.GroupConfigKeys() {
				v, set := dyn[k], false
				src := kmsg.ConfigSourceDefaultConfig
				if _, set = dyn[k]; set {
					src = kmsg.ConfigSourceGroupConfig
				} else {
					v = gc.Value(k)
				}
				add(k, v, !set, false, false, src, []configSynonym{{k, v, src}})
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return immediate(resp)
}
