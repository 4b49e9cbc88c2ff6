package admin

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerOn returns producer pid of partition p, or false.
func producerOn(dps kadm.DescribedProducersTopics, topic string, p int32, pid int64) (kadm.DescribedProducer, bool) {
	dp, ok := dps[topic].Partitions[p]
	if !ok || dp.Err != nil {
		return kadm.DescribedProducer{}, false
	}
	d, ok := dp.ActiveProducers[pid]
	return d, ok
}

func TestAdminTransactions(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9
	c := harness.StartClusterAt(t, harness.FreshNodeSpecs(t, 3), 3, func(int) []string { return harness.TxnBrokerArgs })
	seeds := c.Addrs()
	ctx := harness.Context(t, 60*time.Second)
	adm := kadm.NewClient(harness.NewClient(t, seeds))
	const topic = "txadm"
	harness.CreateTopic(t, adm, topic, 2, 3)

	// Every broker advertises the three APIs at the versions served.
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, harness.NewClient(t, seeds[:1]))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{61: {0, 0}, 65: {0, 0}, 66: {0, 2}}
	for _, k := range av.ApiKeys {
		if w, ok := want[k.ApiKey]; ok && w == [2]int16{k.MinVersion, k.MaxVersion} {
			delete(want, k.ApiKey)
		}
	}
	if len(want) > 0 {
		t.Fatalf("ApiVersions lacks %v", want)
	}

	// An idempotent producer writes two records to each partition, so the
	// transaction below starts at offset 2 on both.
	idem := harness.NewClient(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		for i := range 2 {
			if err := idem.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "idem-%d-%d", p, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	idemPID, _, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The hanging transaction: begun, written to both partitions, never
	// ended (yet). A second transactional id only initializes (Empty).
	hang := harness.TxnClient(t, seeds, "txadm-hang")
	if err := hang.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	var rs []*kgo.Record
	for i := range 4 {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i / 3), Value: fmt.Appendf(nil, "txn-%d", i)})
	}
	if err := hang.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := hang.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idle := harness.TxnClient(t, seeds, "txadm-idle")
	idlePID, _, err := idle.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The symptom an operator starts from: the LSO is stuck at 2.
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil || lso.Error() != nil {
		t.Fatalf("list committed offsets: %v %v", err, lso.Error())
	}
	if o, _ := lso.Lookup(topic, 0); o.Offset != 2 {
		t.Fatalf("partition 0 LSO %d, want 2 (pinned by the open transaction)", o.Offset)
	}

	// ListTransactions with kadm's filters.
	list := func(pids []int64, states []string, pattern string) kadm.ListedTransactions {
		t.Helper()
		var ls kadm.ListedTransactions
		var err error
		if pattern == "" {
			ls, err = adm.ListTransactions(ctx, pids, states)
		} else {
			ls, err = adm.ListTransactionsByTxPattern(ctx, pids, states, pattern)
		}
		if err != nil {
			t.Fatalf("ListTransactions(%v, %v, %q): %v", pids, states, pattern, err)
		}
		return ls
	}
	ls := list(nil, nil, "")
	if l := ls["txadm-hang"]; l.State != "Ongoing" || l.ProducerID != pid {
		t.Fatalf("listed %+v, want txadm-hang Ongoing pid %d", ls.Sorted(), pid)
	}
	if l := ls["txadm-idle"]; l.State != "Empty" || l.ProducerID != idlePID {
		t.Fatalf("listed %+v, want txadm-idle Empty pid %d", ls.Sorted(), idlePID)
	}
	for _, c := range []struct {
		pids    []int64
		states  []string
		pattern string
		want    []string
	}{
		{nil, []string{"Ongoing"}, "", []string{"txadm-hang"}},
		{nil, []string{"Empty", "CompleteCommit"}, "", []string{"txadm-idle"}},
		{[]int64{pid}, nil, "", []string{"txadm-hang"}},
		{[]int64{pid}, []string{"Empty"}, "", nil},
		{nil, nil, "-id", []string{"txadm-idle"}},
		{nil, nil, "^txadm-", []string{"txadm-hang", "txadm-idle"}},
	} {
		if got := list(c.pids, c.states, c.pattern).TransactionalIDs(); !slices.Equal(got, c.want) {
			t.Errorf("ListTransactions(%v, %v, %q) = %v, want %v", c.pids, c.states, c.pattern, got, c.want)
		}
	}

	// The same on the wire, to the coordinator itself: unknown state names
	// come back, and match nothing; a bad pattern is refused.
	coord := adm.FindTxnCoordinators(ctx, "txadm-hang")["txadm-hang"]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	raw := harness.NewClient(t, seeds)
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"Ongoing", "Hanging"}
	lresp, err := lreq.RequestWith(ctx, raw.Broker(int(coord.NodeID)))
	if err != nil || lresp.ErrorCode != 0 || !slices.Equal(lresp.UnknownStateFilters, []string{"Hanging"}) {
		t.Fatalf("list with unknown state: %+v %v", lresp, err)
	}
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "txadm-hang" {
		t.Fatalf("list Ongoing on the coordinator: %+v", lresp.TransactionStates)
	}
	lreq.StateFilters = []string{"Hanging"}
	if lresp, err = lreq.RequestWith(ctx, raw.Broker(int(coord.NodeID))); err != nil || len(lresp.TransactionStates) != 0 {
		t.Fatalf("only unknown states matched %+v (%v)", lresp, err)
	}
	lreq.Version, lreq.StateFilters = 2, nil
	bad := "(unclosed"
	lreq.TransactionalIDPattern = &bad
	if lresp, err = lreq.RequestWith(ctx, raw.Broker(int(coord.NodeID))); err != nil || lresp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad pattern: %+v %v", lresp, err)
	}

	// DescribeTransactions: state, producer, timeout, start, partitions.
	dts, err := adm.DescribeTransactions(ctx, "txadm-hang", "txadm-idle", "txadm-nobody")
	if err != nil {
		t.Fatal(err)
	}
	d := dts["txadm-hang"]
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch != epoch || d.TimeoutMillis != 20000 ||
		d.StartTimestamp < before-1000 || d.StartTimestamp > time.Now().UnixMilli() || d.Coordinator != coord.NodeID {
		t.Fatalf("describe txadm-hang: %+v (pid %d epoch %d coordinator %d)", d, pid, epoch, coord.NodeID)
	}
	if got := d.Topics.Sorted(); len(got) != 1 || got[0].Topic != topic || !slices.Equal(got[0].Partitions, []int32{0, 1}) {
		t.Fatalf("describe txadm-hang partitions %v", got)
	}
	if di := dts["txadm-idle"]; di.Err != nil || di.State != "Empty" || di.StartTimestamp != -1 || len(di.Topics) != 0 {
		t.Fatalf("describe txadm-idle: %+v", di)
	}
	if dn := dts["txadm-nobody"]; !errors.Is(dn.Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe unknown id: %+v", dn)
	}
	// A broker that is not the coordinator says so.
	other := int32(1 + coord.NodeID%3)
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"txadm-hang"}
	dresp, err := dreq.RequestWith(ctx, raw.Broker(int(other)))
	if err != nil || len(dresp.TransactionStates) != 1 || dresp.TransactionStates[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("describe on node %d (coordinator %d): %+v %v", other, coord.NodeID, dresp, err)
	}

	// DescribeProducers: the open transaction's first offset is where the
	// LSO stops; the idempotent producer has none.
	set := kadm.TopicsSet{topic: {0: {}, 1: {}}}
	dps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	for p, wantSeq := range map[int32]int32{0: 2, 1: 0} {
		tp, ok := producerOn(dps, topic, p, pid)
		if !ok || tp.CurrentTxnStartOffset != 2 || tp.LastSequence != wantSeq || tp.ProducerEpoch != epoch || tp.LastTimestamp < before-1000 {
			t.Fatalf("partition %d: transactional producer %+v (found %v), want txn start 2, last seq %d; all %+v", p, tp, ok, wantSeq, dps[topic].Partitions[p])
		}
		ip, ok := producerOn(dps, topic, p, idemPID)
		if !ok || ip.CurrentTxnStartOffset != -1 || ip.LastSequence != 1 || ip.CoordinatorEpoch != -1 {
			t.Fatalf("partition %d: idempotent producer %+v (found %v)", p, ip, ok)
		}
	}
	// A follower of the partition, and an unknown topic.
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p0 := md.Topics[topic].Partitions[0]
	follower := p0.Replicas[0]
	if follower == p0.Leader {
		follower = p0.Replicas[1]
	}
	preq := kmsg.NewPtrDescribeProducersRequest()
	for _, name := range []string{topic, "txadm-missing"} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = name, []int32{0}
		preq.Topics = append(preq.Topics, rt)
	}
	presp, err := preq.RequestWith(ctx, raw.Broker(int(follower)))
	if err != nil || len(presp.Topics) != 2 {
		t.Fatalf("describe producers on follower %d: %+v %v", follower, presp, err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("follower answered %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	if code := presp.Topics[1].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic answered %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}

	// The coordinator dies: the next one loads the transaction from
	// __transaction_state and the partitions' new leaders rebuild the
	// producer state from the log, so the operator's view is the same.
	c.Node(coord.NodeID).Kill9()
	seeds = c.Addrs(coord.NodeID)
	adm = kadm.NewClient(harness.NewClient(t, seeds))
	harness.Eventually(t, 20*time.Second, "a new coordinator describes the open transaction", func() (bool, string) {
		// A fresh client each time: kgo keeps a coordinator it cannot
		// dial cached.
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return false, err.Error()
		}
		defer cl.Close()
		dts, err := kadm.NewClient(cl).DescribeTransactions(ctx, "txadm-hang")
		if err != nil {
			return false, err.Error()
		}
		d := dts["txadm-hang"]
		tl := d.Topics.Sorted()
		return d.Err == nil && d.Coordinator != coord.NodeID && d.State == "Ongoing" && d.ProducerID == pid &&
			len(tl) == 1 && slices.Equal(tl[0].Partitions, []int32{0, 1}), fmt.Sprintf("%+v", d)
	})
	harness.Eventually(t, 20*time.Second, "the partitions' leaders show the open transaction", func() (bool, string) {
		dps, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(2) {
			if tp, ok := producerOn(dps, topic, p, pid); !ok || tp.CurrentTxnStartOffset != 2 {
				return false, fmt.Sprintf("partition %d: %+v (found %v)", p, dps[topic].Partitions[p], ok)
			}
		}
		return true, ""
	})

	// Commit: the transaction completes, the producers have no open
	// transaction, and the LSO reaches the high watermark.
	if err := hang.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "transaction completes", func() (bool, string) {
		dts, err := adm.DescribeTransactions(ctx, "txadm-hang")
		if err != nil {
			return false, err.Error()
		}
		d := dts["txadm-hang"]
		return d.Err == nil && d.State == "CompleteCommit" && len(d.Topics) == 0, fmt.Sprintf("%+v", d)
	})
	if got := list(nil, []string{"Ongoing"}, "").TransactionalIDs(); len(got) != 0 {
		t.Fatalf("still Ongoing after commit: %v", got)
	}
	if got := list(nil, []string{"CompleteCommit"}, "").TransactionalIDs(); !slices.Equal(got, []string{"txadm-hang"}) {
		t.Fatalf("CompleteCommit listing %v", got)
	}
	harness.Eventually(t, 20*time.Second, "no open transaction on the partitions", func() (bool, string) {
		dps, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(2) {
			tp, ok := producerOn(dps, topic, p, pid)
			if !ok || tp.CurrentTxnStartOffset != -1 || tp.CoordinatorEpoch < 0 {
				return false, fmt.Sprintf("partition %d: %+v (found %v)", p, tp, ok)
			}
		}
		return true, ""
	})
	harness.WaitStable(ctx, t, seeds, topic)
}

// TestAdminTransactionsACL: with the authorizer on, ListTransactions
// leaves out ids the caller may not DESCRIBE, DescribeTransactions needs
// DESCRIBE on the id and shows only partitions of topics the caller may
// DESCRIBE, and DescribeProducers needs READ on the topic.
func TestAdminTransactionsACL(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // startAuthorizedBroker restarts the broker
	b, as := startAuthorizedBroker(t, []string{"ta"}, harness.TxnBrokerArgs...)
	ctx := harness.Context(t, 40*time.Second)
	// admin (a super user) leaves a transaction open on ta.
	tx := as("admin", kgo.TransactionalID("tx-secret"), kgo.TransactionTimeout(20*time.Second))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "ta", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	alice := kadm.NewClient(as("alice"))
	if ls, err := alice.ListTransactions(ctx, nil, nil); err != nil || len(ls) != 0 {
		t.Fatalf("alice without ACLs lists %v (%v)", ls.TransactionalIDs(), err)
	}
	if _, err := alice.DescribeTransactions(ctx, "tx-secret"); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("alice describes tx-secret: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	if _, err := alice.DescribeProducers(ctx, kadm.TopicsSet{"ta": {0: {}}}); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice describes producers of ta: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	admin := []string{"--bootstrap", b.Addr, "--sasl-user", "admin", "--sasl-password", "admin-pw"}
	acl := func(args ...string) {
		harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, append(append([]string{"acls", "add"}, admin...), args...)...)
	}
	acl("--allow", "User:alice", "--transactional-id", "tx-secret", "--operation", "describe")
	ls, err := alice.ListTransactions(ctx, nil, nil)
	if err != nil || ls["tx-secret"].State != "Ongoing" {
		t.Fatalf("alice with DESCRIBE lists %+v (%v)", ls.Sorted(), err)
	}
	dts, err := alice.DescribeTransactions(ctx, "tx-secret")
	if d := dts["tx-secret"]; err != nil || d.Err != nil || d.State != "Ongoing" || len(d.Topics) != 0 {
		t.Fatalf("alice with DESCRIBE on the id only: %+v (%v), want Ongoing without ta's partitions", d, err)
	}
	acl("--allow", "User:alice", "--topic", "ta", "--operation", "read")
	dts, err = alice.DescribeTransactions(ctx, "tx-secret")
	if d := dts["tx-secret"]; err != nil || d.Err != nil || len(d.Topics["ta"]) != 1 {
		t.Fatalf("alice with READ on ta: %+v (%v), want ta-0 listed", d, err)
	}
	pid, _, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A new client: the first one cached ta's refused metadata.
	dps, err := kadm.NewClient(as("alice")).DescribeProducers(ctx, kadm.TopicsSet{"ta": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := producerOn(dps, "ta", 0, pid); !ok || p.CurrentTxnStartOffset != 0 {
		t.Fatalf("alice sees producer %+v (found %v), want txn start 0", p, ok)
	}
}
