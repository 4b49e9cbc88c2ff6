package admin

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// describedConfig is one config as a given broker describes it.
type describedConfig struct {
	value    string
	source   kmsg.ConfigSource
	synonyms []kmsg.ConfigSource
}

// describeOn sends DescribeConfigs for one resource to broker id itself
// (kadm would pick any broker) and returns its configs by name.
func describeOn(t *testing.T, cl *kgo.Client, id int32, typ kmsg.ConfigResourceType, name string) map[string]describedConfig {
	t.Helper()
	out, err := tryDescribeOn(t, cl, id, typ, name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryDescribeOn(t *testing.T, cl *kgo.Client, id int32, typ kmsg.ConfigResourceType, name string) (map[string]describedConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl.Broker(int(id)))
	if err != nil {
		return nil, fmt.Errorf("describe %s on broker %d: %w", name, id, err)
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("describe %s on broker %d: %d resources", name, id, len(resp.Resources))
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("describe %s on broker %d: %w", name, id, err)
	}
	out := map[string]describedConfig{}
	for _, c := range resp.Resources[0].Configs {
		d := describedConfig{source: c.Source}
		if c.Value != nil {
			d.value = *c.Value
		}
		for _, s := range c.ConfigSynonyms {
			d.synonyms = append(d.synonyms, s.Source)
		}
		out[c.Name] = d
	}
	return out, nil
}

// waitConfigEverywhere polls every listed broker until it describes
// config key of the resource with value and source (metadata reaches the
// other brokers asynchronously, and a restarted one may not be reachable
// yet).
func waitConfigEverywhere(t *testing.T, cl *kgo.Client, ids []int32, typ kmsg.ConfigResourceType, name, key, value string, source kmsg.ConfigSource) {
	t.Helper()
	for _, id := range ids {
		harness.Eventually(t, 10*time.Second, fmt.Sprintf("broker %d: %s %s = %q (%v)", id, name, key, value, source), func() (bool, string) {
			d, err := tryDescribeOn(t, cl, id, typ, name)
			got := d[key]
			return err == nil && got.value == value && got.source == source, fmt.Sprintf("%q (source %v, err %v)", got.value, got.source, err)
		})
	}
}

func appendCfg(k, v string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.AppendConfig, Name: k, Value: &v}
}

func deleteCfg(k string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k} }

func TestAdminConfigs(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted
	c := harness.StartClusterAt(t, harness.FreshNodeSpecs(t, 3), 3, func(int) []string {
		return []string{"--fsync", "never", "--retention-check-interval", "200ms"}
	})
	all := []int32{1, 2, 3}
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...))
	adm := kadm.NewClient(cl)
	ctx := harness.Context(t, 120*time.Second)
	harness.CreateTopic(t, adm, "cfg", 1, 3)

	// Incremental SET and APPEND; every broker shows the values with their
	// sources.
	if err := harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		harness.SetConfig("retention.ms", "3600000"), harness.SetConfig("min.insync.replicas", "2"), appendCfg("cleanup.policy", "compact"),
	}, "cfg")); err != nil {
		t.Fatalf("alter: %v", err)
	}
	topic := kmsg.ConfigResourceTypeTopic
	waitConfigEverywhere(t, cl, all, topic, "cfg", "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)
	waitConfigEverywhere(t, cl, all, topic, "cfg", "cleanup.policy", "compact,delete", kmsg.ConfigSourceDynamicTopicConfig)
	waitConfigEverywhere(t, cl, all, topic, "cfg", "min.insync.replicas", "2", kmsg.ConfigSourceDynamicTopicConfig)
	d := describeOn(t, cl, 2, topic, "cfg")
	if s := d["segment.bytes"]; s.source != kmsg.ConfigSourceDefaultConfig || s.value != "1073741824" {
		t.Fatalf("segment.bytes %+v, want the default", s)
	}
	if s := d["retention.ms"].synonyms; !slices.Equal(s, []kmsg.ConfigSource{kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("retention.ms synonyms %v", s)
	}
	// kadm's own describe agrees.
	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("cfg", nil); !slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool {
		return c.Key == "retention.ms" && c.MaybeValue() == "3600000" && c.Source == kmsg.ConfigSourceDynamicTopicConfig
	}) {
		t.Fatalf("kadm describe: %+v", rc.Configs)
	}

	// Validation with Kafka's codes; validate_only changes nothing.
	for _, tc := range []struct {
		what   string
		topic  string
		config kadm.AlterConfig
		want   error
	}{
		{"unknown topic", "nope", harness.SetConfig("retention.ms", "1"), kerr.UnknownTopicOrPartition},
		{"bad value", "cfg", harness.SetConfig("retention.ms", "soon"), kerr.InvalidConfig},
		{"unknown key", "cfg", harness.SetConfig("retention.parsecs", "1"), kerr.InvalidConfig},
		{"min isr above rf", "cfg", harness.SetConfig("min.insync.replicas", "4"), kerr.InvalidConfig},
		{"append to a scalar", "cfg", appendCfg("retention.ms", "1"), kerr.InvalidConfig},
	} {
		if err := harness.AlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tc.config}, tc.topic)); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.what, err, tc.want)
		}
	}
	if err := harness.AlterErr(adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("retention.ms", "5")}, "cfg")); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if got := describeOn(t, cl, 1, topic, "cfg")["retention.ms"].value; got != "3600000" {
		t.Fatalf("validate_only changed retention.ms to %s", got)
	}

	// Dynamic broker configs: the cluster-wide default, then broker 2's
	// own; a topic without its own value follows on every broker.
	harness.CreateTopic(t, adm, "plain", 1, 3)
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("log.retention.ms", "86400000")})); err != nil {
		t.Fatalf("alter cluster default: %v", err)
	}
	waitConfigEverywhere(t, cl, all, topic, "plain", "retention.ms", "86400000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("log.retention.ms", "43200000")}, 2)); err != nil {
		t.Fatalf("alter broker 2: %v", err)
	}
	waitConfigEverywhere(t, cl, []int32{2}, topic, "plain", "retention.ms", "43200000", kmsg.ConfigSourceDynamicBrokerConfig)
	waitConfigEverywhere(t, cl, []int32{1, 3}, topic, "plain", "retention.ms", "86400000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if s := describeOn(t, cl, 2, topic, "plain")["retention.ms"].synonyms; !slices.Equal(s, []kmsg.ConfigSource{
		kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("broker 2 retention.ms synonyms %v", s)
	}
	waitConfigEverywhere(t, cl, []int32{2}, kmsg.ConfigResourceTypeBroker, "2", "log.retention.ms", "43200000", kmsg.ConfigSourceDynamicBrokerConfig)
	if got := describeOn(t, cl, 3, kmsg.ConfigResourceTypeBroker, "")["log.retention.ms"]; got.value != "86400000" || got.source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster default resource: %+v", got)
	}
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("broker.id", "7")}, 1)); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("read-only broker.id: %v, want INVALID_REQUEST", err)
	}
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("log.dirs", "/x")})); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("non-dynamic broker key: %v, want INVALID_CONFIG", err)
	}
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{deleteCfg("log.retention.ms")}, 2)); err != nil {
		t.Fatal(err)
	}
	waitConfigEverywhere(t, cl, []int32{2}, topic, "plain", "retention.ms", "86400000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// AlterConfigs (legacy) replaces the topic's whole dynamic set.
	if err := harness.AlterErr(adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{harness.SetConfig("retention.ms", "7200000"), harness.SetConfig("min.insync.replicas", "3")}, "cfg")); err != nil {
		t.Fatalf("alter configs state: %v", err)
	}
	waitConfigEverywhere(t, cl, all, topic, "cfg", "retention.ms", "7200000", kmsg.ConfigSourceDynamicTopicConfig)
	waitConfigEverywhere(t, cl, all, topic, "cfg", "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	// min.insync.replicas=3: acks=all works while all three are in sync,
	// and is refused with NOT_ENOUGH_REPLICAS once one is gone. The node
	// stopped is the active controller, so the configs must also survive
	// the failover.
	produce := func(pcl *kgo.Client) error {
		return pcl.ProduceSync(harness.Context(t, 15*time.Second), &kgo.Record{Topic: "cfg", Value: []byte("v")}).FirstErr()
	}
	pcl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2))
	if err := produce(pcl); err != nil {
		t.Fatalf("acks=all with 3 in sync: %v", err)
	}
	victim := c.Controller(10 * time.Second)
	rest := slices.DeleteFunc(slices.Clone(all), func(id int32) bool { return id == victim })
	c.Node(victim).Stop()
	scl := c.Node(rest[0]).Client(t, kgo.SeedBrokers(c.Addrs(victim)...))
	sadm := kadm.NewClient(scl)
	harness.WaitMetadata(t, sadm, 20*time.Second, "ISR without the stopped node", func(m kadm.Metadata) bool {
		p := m.Topics["cfg"].Partitions[0]
		return len(p.ISR) == 2 && !slices.Contains(p.ISR, victim) && p.Leader >= 0
	})
	waitConfigEverywhere(t, scl, rest, topic, "cfg", "min.insync.replicas", "3", kmsg.ConfigSourceDynamicTopicConfig)
	spcl := c.Node(rest[0]).Client(t, kgo.SeedBrokers(c.Addrs(victim)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2))
	if err := produce(spcl); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas 3 and 2 in sync: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if err := harness.AlterErr(sadm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("min.insync.replicas", "2")}, "cfg")); err != nil {
		t.Fatalf("lower min.insync.replicas after failover: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for err := produce(spcl); err != nil; err = produce(spcl) {
		if time.Now().After(deadline) {
			t.Fatalf("acks=all after lowering min.insync.replicas to 2: %v", err)
		}
	}

	// The restarted node replays the configs from the metadata log.
	c.Node(victim).Restart()
	scl = c.Node(rest[0]).Client(t, kgo.SeedBrokers(c.Addrs()...))
	waitConfigEverywhere(t, scl, []int32{victim}, topic, "cfg", "min.insync.replicas", "2", kmsg.ConfigSourceDynamicTopicConfig)
	waitConfigEverywhere(t, scl, []int32{victim}, topic, "plain", "retention.ms", "86400000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// retention.ms lowered on a live topic: the next retention pass on
	// every replica deletes the old segments.
	harness.CreateTopic(t, sadm, "ret", 1, 3)
	if err := harness.AlterErr(sadm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("segment.bytes", "1024")}, "ret")); err != nil {
		t.Fatal(err)
	}
	waitConfigEverywhere(t, scl, all, topic, "ret", "segment.bytes", "1024", kmsg.ConfigSourceDynamicTopicConfig)
	rcl := c.Node(rest[0]).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	for i := 0; i < 40; i++ {
		if err := rcl.ProduceSync(ctx, &kgo.Record{Topic: "ret", Value: []byte(strings.Repeat(fmt.Sprint(i%10), 300))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	startOffset := func() int64 {
		so, err := sadm.ListStartOffsets(harness.Context(t, 5*time.Second), "ret")
		if err != nil {
			return -1
		}
		o, _ := so.Lookup("ret", 0)
		return o.Offset
	}
	if o := startOffset(); o != 0 {
		t.Fatalf("log start %d before lowering retention", o)
	}
	// Real time: retention.ms=1000 can only delete records older than 1 s.
	time.Sleep(1100 * time.Millisecond)
	if err := harness.AlterErr(sadm.AlterTopicConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("retention.ms", "1000")}, "ret")); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "most of 40 records gone after retention.ms=1000", func() (bool, string) {
		o := startOffset()
		return o >= 30, fmt.Sprint("log start offset ", o)
	})
}

// confluentConfigsScript changes retention.ms with confluent-kafka's
// AdminClient.alter_configs (the legacy AlterConfigs API in 1.7.0) and
// prints what describe_configs reports: "<value> <source>".
const confluentConfigsScript = `
import sys
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
addr, topic, value = sys.argv[1], sys.argv[2], sys.argv[3]
a = AdminClient({"bootstrap.servers": addr})
r = ConfigResource("topic", topic, set_config={"retention.ms": value})
for res, f in a.alter_configs([r], request_timeout=15).items():
    f.result()
for res, f in a.describe_configs([ConfigResource("topic", topic)], request_timeout=15).items():
    e = f.result()["retention.ms"]
    print(e.value, ConfigSource(e.source).name)
`

func TestAdminConfigsConfluent(t *testing.T) {
	t.Parallel()
	harness.NeedConfluentKafka(t)
	b := harness.StartBroker(t, t.TempDir(), "--fsync", "never")
	adm := kadm.NewClient(b.Client(t))
	harness.CreateTopic(t, adm, "py", 2, 1)
	out := harness.RunCmd(t, "", 60*time.Second, "/usr/bin/python3", "-c", confluentConfigsScript, b.Addr, "py", "1234567")
	if got := strings.TrimSpace(out); got != "1234567 DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("python describe after alter: %q, want \"1234567 DYNAMIC_TOPIC_CONFIG\"", got)
	}
	rcs, err := adm.DescribeTopicConfigs(harness.Context(t, 10*time.Second), "py")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("py", nil)
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && (c.MaybeValue() != "1234567" || c.Source != kmsg.ConfigSourceDynamicTopicConfig) {
			t.Fatalf("kadm sees retention.ms %s (%v)", c.MaybeValue(), c.Source)
		}
	}
}

// With the authorizer on, altering configs needs ALTER_CONFIGS on the
// topic (TOPIC_AUTHORIZATION_FAILED) or on the cluster for broker configs
// (CLUSTER_AUTHORIZATION_FAILED).
func TestAdminConfigsACL(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // startAuthorizedBroker restarts the broker
	b, as := startAuthorizedBroker(t, []string{"orders"}, "--fsync", "never")
	alice, admin := kadm.NewClient(as("alice")), kadm.NewClient(as("admin"))
	ctx := harness.Context(t, 30*time.Second)
	retention := []kadm.AlterConfig{harness.SetConfig("retention.ms", "60000")}
	if err := harness.AlterErr(alice.AlterTopicConfigs(ctx, retention, "orders")); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := harness.AlterErr(alice.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("log.retention.ms", "60000")})); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice altering broker configs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpAlterConfigs))
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("granting ALTER_CONFIGS: %+v %v", res, err)
	}
	if err := harness.AlterErr(alice.AlterTopicConfigs(ctx, retention, "orders")); err != nil {
		t.Fatalf("alice with ALTER_CONFIGS: %v", err)
	}
	if got := describeOn(t, b.Client(t, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism())), 1, kmsg.ConfigResourceTypeTopic, "orders")["retention.ms"]; got.value != "60000" {
		t.Fatalf("retention.ms after alice's change: %+v", got)
	}
}
