package netpath

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Shared by AlterConfigs (33), IncrementalAlterConfigs (44) and
// DescribeConfigs (32): dynamic configs live in the metadata image
// (metadata/configs.go), are validated here against the engine's parser
// before they are proposed, and are applied by every broker's reconcile.

// maxConfigEntries bounds the config entries of one resource: the topic
// and dynamic broker key sets are a dozen names each, so a longer list is
// garbage (and would only make validation work).
const maxConfigEntries = 1000

// configOp is one requested change: SET, DELETE, APPEND or SUBTRACT
// (kmsg.IncrementalAlterConfigOp values); AlterConfigs uses only SET.
type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// configErr is a per-resource failure: the code and message the response
// carries.
type configErr struct {
	code int16
	msg  string
}

func (e *configErr) Error() string { return e.msg }

func cfgErr(code int16, format string, args ...any) *configErr {
	return &configErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// listConfigs are the list-valued configs that APPEND and SUBTRACT apply to
// (Kafka: type LIST).
var listConfigs = map[string]bool{"cleanup.policy": true, "log.cleanup.policy": true,
	engine.LeaderThrottledReplicasKey: true, engine.FollowerThrottledReplicasKey: true}

// readOnlyBrokerConfigs are broker settings DescribeConfigs shows that
// need a restart to change: altering them is refused with INVALID_REQUEST,
// like Kafka's "Cannot update these configs dynamically".
var readOnlyBrokerConfigs = map[string]bool{
	"broker.id": true, "auto.create.topics.enable": true, "num.partitions": true,
	"socket.request.max.bytes": true,
}

// alterConfigResources runs alterConfigResource for each of n resources
// (at returns the i-th) and returns the outcome per resource. Resources
// are independent; one named twice in the request fails every time
// (INVALID_REQUEST), as Kafka answers.
func (s *Server) alterConfigResources(r *request, n int, at func(i int) (kmsg.ConfigResourceType, string, []configOp), replace, validateOnly bool) []*configErr {
	type key struct {
		t    kmsg.ConfigResourceType
		name string
	}
	count := map[key]int{}
	for i := 0; i < n; i++ {
		t, name, _ := at(i)
		count[key{t, name}]++
	}
	out := make([]*configErr, n)
	for i := range out {
		t, name, ops := at(i)
		if count[key{t, name}] > 1 {
			out[i] = cfgErr(kerr.InvalidRequest.Code, "resource named more than once in the request")
			continue
		}
		out[i] = s.alterConfigResource(r, t, name, ops, replace, validateOnly)
	}
	return out
}

// alterConfigResource validates one resource's change and, unless
// validateOnly, proposes it through the controller. replace is
// AlterConfigs: ops (all SET) become the whole dynamic set.
func (s *Server) alterConfigResource(r *request, typ kmsg.ConfigResourceType, name string, ops []configOp, replace, validateOnly bool) *configErr {
	if len(ops) > maxConfigEntries {
		return cfgErr(kerr.InvalidRequest.Code, "%d config entries, at most %d", len(ops), maxConfigEntries)
	}
	seen := map[string]bool{}
	for _, o := range ops {
		if seen[o.name] {
			return cfgErr(kerr.InvalidRequest.Code, "config %q given twice", o.name)
		}
		seen[o.name] = true
	}
	img := s.node.MetadataImage()
	cmd := metadata.AlterConfigs{Name: name, Replace: replace}
	var current map[string]string
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorize(r, metadata.OpAlterConfigs, metadata.ResourceTopic, name) {
			return cfgErr(kerr.TopicAuthorizationFailed.Code, "not authorized to alter the configs of topic %q", name)
		}
		t, _, ok := s.cluster.LookupTopic(img, name)
		if !ok {
			return cfgErr(kerr.UnknownTopicOrPartition.Code, "unknown topic %q", name)
		}
		cmd.Kind, cmd.TopicID, current = metadata.ConfigTopic, t.ID, t.Configs
		defaults := s.defaultsFor(img)
		next, cerr := applyConfigOps(current, ops, replace, func(k string) string { return engine.ConfigValue(defaults, k) })
		if cerr != nil {
			return cerr
		}
		cfg, cerr := checkTopicConfigs(defaults, current, next)
		if cerr != nil {
			return cerr
		}
		if old, err := engine.ParseTopicConfig(defaults, current); err == nil {
			if cerr := s.checkRemoteStorage(cfg, &old); cerr != nil {
				return cerr
			}
		} else if cerr := s.checkRemoteStorage(cfg, nil); cerr != nil {
			return cerr
		}
		if rf := len(t.Partitions[0].TargetReplicas()); int(cfg.MinInsyncReplicas) > rf {
			// Kafka accepts it only to refuse every acks=all write; the
			// operator almost certainly mistyped.
			return cfgErr(kerr.InvalidConfig.Code, "min.insync.replicas %d exceeds the replication factor %d", cfg.MinInsyncReplicas, rf)
		}
		cmd.Set, cmd.Delete = diffConfigs(current, next, replace)
	case kmsg.ConfigResourceTypeBroker:
		if !s.authorizeCluster(r, metadata.OpAlterConfigs) {
			return cfgErr(kerr.ClusterAuthorizationFailed.Code, "not authorized to alter broker configs")
		}
		if name != "" {
			id, err := strconv.ParseInt(name, 10, 32)
			if _, ok := img.Broker(int32(id)); err != nil || !ok || strconv.FormatInt(id, 10) != name {
				return cfgErr(kerr.InvalidRequest.Code, "broker resource %q is not a registered broker id (or \"\" for the cluster-wide default)", name)
			}
		}
		for _, o := range ops {
			if readOnlyBrokerConfigs[o.name] {
				return cfgErr(kerr.InvalidRequest.Code, "cannot update %s dynamically (restart with the flag instead)", o.name)
			}
			if !engine.IsDynamicBrokerKey(o.name) {
				return cfgErr(kerr.InvalidConfig.Code, "%q is not a dynamic broker config; dynamic: %s", o.name, strings.Join(engine.DynamicBrokerKeys(), ", "))
			}
		}
		cmd.Kind, current = metadata.ConfigBroker, img.BrokerConfigs(name)
		inherited := func(bk string) string {
			tk, _ := engine.TopicKeyFor(bk)
			if v, ok := img.BrokerConfigs("")[bk]; ok && name != "" {
				return v
			}
			return engine.ConfigValue(s.engine.StaticDefaults(), tk)
		}
		next, cerr := applyConfigOps(current, ops, replace, inherited)
		if cerr != nil {
			return cerr
		}
		if _, err := engine.BrokerDefaults(next); err != nil {
			return cfgErr(errorCode(err), "%v", err)
		}
		cmd.Set, cmd.Delete = diffConfigs(current, next, replace)
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.authorize(r, metadata.OpAlterConfigs, metadata.ResourceGroup, name) {
			return cfgErr(kerr.GroupAuthorizationFailed.Code, "not authorized to alter the configs of group %q", name)
		}
		if name == "" {
			return cfgErr(kerr.InvalidRequest.Code, "empty group id")
		}
		cmd.Kind, current = metadata.ConfigGroup, img.GroupConfigs(name)
		defaults := s.shares.GroupConfig("") // the broker's: "" has no configs
		next, cerr := applyConfigOps(current, ops, replace, defaults.Value)
		if cerr != nil {
			return cerr
		}
		if _, err := s.shares.Config().ParseGroupConfig(next); err != nil {
			return cfgErr(kerr.InvalidConfig.Code, "%v", err)
		}
		cmd.Set, cmd.Delete = diffConfigs(current, next, replace)
	default:
		return cfgErr(kerr.InvalidRequest.Code, "resource type %d cannot be altered (TOPIC, BROKER and GROUP can)", typ)
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := s.adminContext(0)
	err := s.node.AlterConfigs(ctx, cmd)
	cancel()
	if err != nil {
		return cfgErr(errorCode(err), "%v", err)
	}
	if err := s.cluster.Reconcile(); err != nil {
		s.log.Warn("reconcile after alter configs", "err", err)
	}
	s.log.Info("altered configs", "type", typ, "resource", name, "set", cmd.Set, "delete", cmd.Delete, "replace", replace)
	return nil
}

// checkTopicConfigs validates a topic's resulting dynamic configs next
// over defaults, and the change from current (remote.storage.enable
// cannot go back to false, engine.CheckConfigChange).
func checkTopicConfigs(defaults engine.TopicConfig, current, next map[string]string) (engine.TopicConfig, *configErr) {
	cfg, err := engine.ParseTopicConfig(defaults, next)
	if err != nil {
		return cfg, cfgErr(errorCode(err), "%v", err)
	}
	if old, err := engine.ParseTopicConfig(defaults, current); err == nil {
		if err := engine.CheckConfigChange(old, cfg); err != nil {
			return cfg, cfgErr(errorCode(err), "%v", err)
		}
	}
	return cfg, nil
}

// checkRemoteStorage refuses a topic config that turns remote.storage.enable
// on when this broker has no object store: the topic would accept the
// setting and then never upload, so local retention would hold its
// segments forever. old is the topic's config before the change (nil for
// a new topic); a topic already tiered (created through a broker with a
// store) may still have its other configs altered here.
func (s *Server) checkRemoteStorage(next engine.TopicConfig, old *engine.TopicConfig) *configErr {
	if s.cfg.RemoteStorage || !next.RemoteStorageEnable || old != nil && old.RemoteStorageEnable {
		return nil
	}
	return cfgErr(kerr.InvalidConfig.Code, "%s needs an object store: start the broker with --object-store-endpoint (and --object-store-bucket) to use tiered storage", engine.RemoteStorageEnableKey)
}

// applyConfigOps returns current with ops applied (replace: ops alone).
//
// APPEND and SUBTRACT on a key without a dynamic value start from the value
// in force below it, inherited (Kafka does the same since KAFKA-10140).
func applyConfigOps(current map[string]string, ops []configOp, replace bool, inherited func(name string) string) (map[string]string, *configErr) {
	next := map[string]string{}
	if !replace {
		next = maps.Clone(current)
		if next == nil {
			next = map[string]string{}
		}
	}
	for _, o := range ops {
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			if o.value == nil {
				return nil, cfgErr(kerr.InvalidConfig.Code, "null value for %s", o.name)
			}
			next[o.name] = *o.value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, o.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !listConfigs[o.name] {
				return nil, cfgErr(kerr.InvalidConfig.Code, "%s is not a list config: APPEND and SUBTRACT apply to list configs only", o.name)
			}
			if o.value == nil {
				return nil, cfgErr(kerr.InvalidConfig.Code, "null value for %s", o.name)
			}
			items := splitList(next[o.name])
			if _, set := next[o.name]; !set {
				items = splitList(inherited(o.name))
			}
			for _, v := range splitList(*o.value) {
				if o.op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, v) {
					items = append(items, v)
				} else if o.op == kmsg.IncrementalAlterConfigOpSubtract {
					items = slices.DeleteFunc(items, func(x string) bool { return x == v })
				}
			}
			next[o.name] = strings.Join(items, ",")
		default:
			return nil, cfgErr(kerr.InvalidRequest.Code, "unknown config operation %d for %s", o.op, o.name)
		}
	}
	return next, nil
}

func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// diffConfigs turns a resulting set into the command's Set and Delete
// (replace: the whole set).
func diffConfigs(current, next map[string]string, replace bool) (map[string]string, []string) {
	if replace {
		return next, nil
	}
	set := map[string]string{}
	var del []string
	for k, v := range next {
		if cv, ok := current[k]; !ok || cv != v {
			set[k] = v
		}
	}
	for k := range current {
		if _, ok := next[k]; !ok {
			del = append(del, k)
		}
	}
	slices.Sort(del)
	return set, del
}

// brokerDynamic returns the dynamic broker configs that apply to this
// broker (cluster-wide default, then its own), in broker key names, and
// where each came from.
func (s *Server) brokerDynamic(img *metadata.Image) (kv map[string]string, src map[string]kmsg.ConfigSource) {
	kv, src = map[string]string{}, map[string]kmsg.ConfigSource{}
	for k, v := range img.BrokerConfigs("") {
		kv[k], src[k] = v, kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	for k, v := range img.BrokerConfigs(strconv.Itoa(int(s.cfg.NodeID))) {
		kv[k], src[k] = v, kmsg.ConfigSourceDynamicBrokerConfig
	}
	return kv, src
}

// defaultsFor returns the topic defaults img implies on this broker: the
// static defaults (flags) with the dynamic broker configs applied. It is
// computed from the image rather than read from the engine so that a
// describe right after an alter never shows the previous value.
func (s *Server) defaultsFor(img *metadata.Image) engine.TopicConfig {
	kv, _ := s.brokerDynamic(img)
	static := s.engine.StaticDefaults()
	d, err := engine.BrokerDefaults(kv)
	if err != nil {
		return static
	}
	cfg, err := engine.ParseTopicConfig(static, d)
	if err != nil {
		return static
	}
	return cfg
}

// configSynonym is one value a config could take, in precedence order.
type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
}

// brokerKeySynonyms lists the broker-level values of broker key bk
// (whose topic key is tk) below the topic level: dynamic per-broker,
// dynamic cluster default, static flag, Kafka default. The first is the
// value in force at broker level.
func (s *Server) brokerKeySynonyms(img *metadata.Image, bk, tk string) []configSynonym {
	var out []configSynonym
	if v, ok := img.BrokerConfigs(strconv.Itoa(int(s.cfg.NodeID)))[bk]; ok {
		out = append(out, configSynonym{bk, v, kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if v, ok := img.BrokerConfigs("")[bk]; ok {
		out = append(out, configSynonym{bk, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	static, def := engine.ConfigValue(s.engine.StaticDefaults(), tk), engine.ConfigValue(engine.DefaultTopicConfig(), tk)
	if d, ok := engine.BrokerOnlyDefault(bk); ok {
		// No topic synonym and no flag: Kafka's default is next.
		static, def = d, d
	}
	if static != def {
		out = append(out, configSynonym{bk, static, kmsg.ConfigSourceStaticBrokerConfig})
	}
	return append(out, configSynonym{bk, def, kmsg.ConfigSourceDefaultConfig})
}
