package core

import (
	"errors"
	"fmt"
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

// TestACLs runs a broker with SASL on its plaintext listener and the
// authorizer on (admin is a super user), and checks that operations are
// denied by default with the right error codes and allowed once an ACL
// says so, that DENY wins, and that a forged replica fetch is refused.
func TestACLs(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted with new flags
	if testing.Short() {
		t.Skip("process-level test")
	}
	b := harness.StartBroker(t, t.TempDir())
	for _, u := range []string{"admin", "alice", "bob"} {
		harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, "users", "set", "--bootstrap", b.Addr, "--password", u+"-pw", u)
	}
	harness.CreateTopic(t, kadm.NewClient(b.Client(t)), "orders", 1, 1)
	harness.CreateTopic(t, kadm.NewClient(b.Client(t)), "secret", 1, 1)
	// Credentials live in the metadata log: they survive the restart
	// that turns security on.
	b.Stop()
	b.Args = append(b.Args, "--sasl-listeners", "plaintext", "--authorizer", "--super-users", "User:admin", "--auth-failure-delay", "100ms")
	b.Restart()

	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		return b.Client(t, append([]kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()),
			kgo.RequestRetries(1), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(5 * time.Second)}, opts...)...)
	}
	produce := func(cl *kgo.Client, topic string) error {
		return cl.ProduceSync(harness.Context(t, 10*time.Second), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	alice, bob := as("alice"), as("bob")
	if err := produce(alice, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Metadata for all topics lists only what the principal may describe.
	md, err := kadm.NewClient(alice).Metadata(harness.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 0 {
		t.Fatalf("alice sees topics %v without DESCRIBE", md.Topics.Names())
	}
	// alice may not manage ACLs.
	res, err := kadm.NewClient(alice).CreateACLs(harness.Context(t, 10*time.Second), kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpWrite))
	if err == nil && (len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("alice creating an ACL: %+v, want CLUSTER_AUTHORIZATION_FAILED", res)
	}
	// The admin grants through the real `ringlog acls` command.
	admin := []string{"--bootstrap", b.Addr, "--sasl-user", "admin", "--sasl-password", "admin-pw"}
	acl := func(args ...string) string {
		return harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, append(append([]string{"acls"}, args[:1]...), append(admin, args[1:]...)...)...)
	}
	acl("add", "--allow", "User:alice", "--topic", "orders", "--operation", "write", "--operation", "read")
	acl("add", "--allow", "User:alice", "--group", "g1", "--operation", "read")
	acl("add", "--allow", "User:*", "--topic", "sec", "--prefixed", "--operation", "read")
	acl("add", "--deny", "User:bob", "--topic", "secret", "--operation", "all")
	if out := acl("list"); !strings.Contains(out, "User:alice") || !strings.Contains(out, "DENY") {
		t.Fatalf("acls list:\n%s", out)
	}
	if err := produce(alice, "orders"); err != nil {
		t.Fatalf("alice with WRITE: %v", err)
	}
	if err := produce(bob, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// alice reads orders in group g1; group g2 is refused.
	g1 := as("alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := g1.PollFetches(harness.Context(t, 30*time.Second))
	if errs := fs.Errors(); len(errs) > 0 || fs.NumRecords() != 1 {
		t.Fatalf("alice in g1: %d records, errors %v", fs.NumRecords(), errs)
	}
	if err := g1.CommitUncommittedOffsets(harness.Context(t, 10*time.Second)); err != nil {
		t.Fatalf("commit in g1: %v", err)
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.ProtocolType, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = "g2", "consumer", 10000, 10000
	jr.Protocols = append(jr.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: []byte{0, 0}})
	// franz-go asks FindCoordinator first, which is already refused.
	resp, err := jr.RequestWith(harness.Context(t, 10*time.Second), alice)
	if !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || resp.ErrorCode != kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("alice joining g2: %v %v, want GROUP_AUTHORIZATION_FAILED", err, resp)
	}
	// The prefixed wildcard-principal ACL lets anyone read "secret", but
	// bob's DENY wins for him.
	read := func(cl *kgo.Client, topic string) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		req.Version = 11
		resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := read(alice, "secret"); code != 0 {
		t.Fatalf("alice reading secret through the prefixed ACL: %v", kerr.ErrorForCode(code))
	}
	if code := read(bob, "secret"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob reading secret despite DENY: %v", kerr.ErrorForCode(code))
	}
	// A consumer posing as a replica (CVE-2018-1288) is refused.
	forged := kmsg.NewPtrFetchRequest()
	forged.Version, forged.ReplicaID, forged.MaxBytes = 11, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	forged.Topics = append(forged.Topics, ft)
	fresp, err := forged.RequestWith(harness.Context(t, 10*time.Second), alice)
	if err != nil || fresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("forged replica fetch: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, fresp)
	}
	// Clients cannot write internal topics, even the super user.
	if err := produce(as("admin"), "__consumer_offsets"); err == nil {
		t.Fatal("produce to __consumer_offsets accepted")
	}
	// Revoking alice's WRITE takes effect at once.
	out := acl("remove", "--allow", "User:alice", "--topic", "orders", "--operation", "write")
	if err := produce(alice, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after revocation: %v\n%s\n%s", err, out, acl("list"))
	}
}

// TestSecureCluster runs 3 brokers with SASL required on the plaintext
// listener (the one brokers use between themselves) and the authorizer
// on: replication and transaction markers must authenticate as the
// inter-broker user, and acks=all produces by an ordinary user (with
// ACLs) and transactions must still complete across brokers.
func TestSecureCluster(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // nodes restarted with new flags
	if testing.Short() {
		t.Skip("process-level test")
	}
	c := harness.StartReplCluster(t, 3)
	for _, u := range []string{"broker", "alice"} {
		harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, "users", "set", "--bootstrap", c.Node(1).Addr, "--password", u+"-pw", u)
	}
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	resp, err := adm.CreateTopic(harness.Context(t, 30*time.Second), 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "secure")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Nodes {
		b.Stop()
	}
	for _, b := range c.Nodes {
		b.Args = append(b.Args, "--sasl-listeners", "plaintext", "--authorizer", "--super-users", "User:broker",
			"--inter-broker-user", "broker", "--inter-broker-password", "broker-pw")
		b.Launch()
	}
	for _, b := range c.Nodes {
		b.WaitReady(60 * time.Second)
	}
	admin := []string{"--bootstrap", c.Node(1).Addr, "--sasl-user", "broker", "--sasl-password", "broker-pw"}
	harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, append(append([]string{"acls", "add"}, admin...), "--allow", "User:alice", "--topic", "secure", "--operation", "write", "--operation", "read")...)
	harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, append(append([]string{"acls", "add"}, admin...), "--allow", "User:alice", "--transactional-id", "secure-txn", "--operation", "write", "--operation", "describe")...)

	alice := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("secure"))
	ctx := harness.Context(t, 60*time.Second)
	for i := range 60 {
		// acks=all needs both followers' fetches: they authenticate as
		// the inter-broker user.
		if err := alice.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d as alice: %v", i, err)
		}
	}
	txnCl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("secure"), kgo.TransactionalID("secure-txn"))
	if err := txnCl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		txnCl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("txn-%d", i))}, nil)
	}
	if err := txnCl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The markers go to all three partitions' leaders, two of them over
	// authenticated broker-to-broker connections.
	if err := txnCl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit as alice: %v", err)
	}
	recs := harness.ConsumeAll(ctx, t, c.Node(1).Addr, "secure", 69, kgo.SeedBrokers(c.Addrs()...),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(recs) != 69 {
		t.Fatalf("read %d records, want 69", len(recs))
	}
	// Without credentials nothing is served.
	anon := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequestRetries(0))
	if err := anon.Ping(harness.Context(t, 10*time.Second)); err == nil {
		t.Fatal("unauthenticated client served on a SASL listener")
	}
}
