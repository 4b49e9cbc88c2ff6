package netpath

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tests of the consumer (KIP-848) group wire path: requests travel through
// the real frame decoder into the handlers, a fake Groups records what
// reached the coordinator, and responses are re-read with kmsg at the
// request's version, so nullability is checked as a client sees it.

// fakeGroups is Groups with the calls the consumer-protocol tests make;
// any other call panics through the nil embedded interface.
type fakeGroups struct {
	Groups
	stale error
	// mgr answers ConsumerHeartbeat and CommitOffsets: futures can only
	// be made inside coordinator/group. A Manager without SetTopics
	// answers heartbeats COORDINATOR_NOT_AVAILABLE; one owning no
	// partition answers commits NOT_COORDINATOR.
	mgr *group.Manager

	heartbeats []group.ConsumerHeartbeatRequest
	commits    []group.OffsetCommitRequest
	fetchOpts  []group.FetchOptions
	listed     [][2][]string
	described  []string
	consumer   map[string]group.ConsumerGroupDescription
	listing    []group.GroupListing
}

func (f *fakeGroups) Stale() error { return f.stale }

func (f *fakeGroups) ConsumerHeartbeat(req group.ConsumerHeartbeatRequest) *group.Future[group.ConsumerHeartbeatResponse] {
	f.heartbeats = append(f.heartbeats, req)
	return f.mgr.ConsumerHeartbeat(req)
}

func (f *fakeGroups) ConsumerDescribe(ids []string) []group.ConsumerGroupDescription {
	var out []group.ConsumerGroupDescription
	for _, id := range ids {
		f.described = append(f.described, id)
		d, ok := f.consumer[id]
		if !ok {
			d = group.ConsumerGroupDescription{Group: id, Err: group.ErrGroupIDNotFound, State: group.ConsumerDead}
		}
		out = append(out, d)
	}
	return out
}

func (f *fakeGroups) ListFiltered(states, types []string) ([]group.GroupListing, error) {
	f.listed = append(f.listed, [2][]string{states, types})
	var out []group.GroupListing
	for _, l := range f.listing {
		if len(types) == 0 || strings.EqualFold(types[0], l.GroupType) {
			out = append(out, l)
		}
	}
	return out, nil
}

func (f *fakeGroups) CommitOffsets(req group.OffsetCommitRequest) *group.Future[group.OffsetCommitResponse] {
	f.commits = append(f.commits, req)
	return f.mgr.CommitOffsets(req)
}

func (f *fakeGroups) FetchOffsetsOpts(groupID string, tps []group.TopicPartition, opts group.FetchOptions) ([]group.FetchedOffset, error) {
	f.fetchOpts = append(f.fetchOpts, opts)
	if opts.MemberEpoch == 3 {
		return nil, group.ErrStaleMemberEpoch
	}
	return nil, nil
}

// fakeMeta is Metadata with only the image.
type fakeMeta struct {
	Metadata
	img *metadata.Image
}

func (m fakeMeta) MetadataImage() *metadata.Image { return m.img }

// addrConn is a net.Conn with a fixed remote address.
type addrConn struct{ net.Conn }

func (addrConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9), Port: 4242} }

var (
	testTopicA = metadata.UUID{0xaa, 1}
	testTopicB = metadata.UUID{0x0b, 2}
)

// testImage has topics "a" and "b" and, with acls, lets the anonymous
// principal READ and DESCRIBE group "ok" only.
func testImage(t testing.TB, acls bool) *metadata.Image {
	t.Helper()
	img := metadata.EmptyImage()
	apply := func(c metadata.Command) metadata.Result { t.Helper(); return applyCmd(t, &img, c) }
	apply(metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c1"}})
	reg := apply(metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c1", ID: 1, Incarnation: metadata.UUID{1},
		Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092}}}})
	apply(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: 1, Epoch: reg.Broker.Epoch}})
	apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "a", ID: testTopicA, Assignment: [][]int32{{1}, {1}, {1}}}})
	apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "b", ID: testTopicB, Assignment: [][]int32{{1}}}})
	if acls {
		var list []metadata.ACL
		for _, op := range []int8{metadata.OpRead, metadata.OpDescribe} {
			list = append(list, metadata.ACL{ResourceType: metadata.ResourceGroup, ResourceName: "ok", PatternType: metadata.PatternLiteral,
				Principal: AnonymousPrincipal, Host: metadata.WildcardHost, Operation: op, Permission: metadata.PermissionAllow})
		}
		apply(metadata.Command{CreateACLs: &metadata.CreateACLs{ACLs: list}})
	}
	return img
}

func newConsumerTestServer(t testing.TB, authorizer bool) (*Server, *fakeGroups) {
	t.Helper()
	mgr, err := group.NewManager(group.DefaultConfig(), group.NewMemoryPersister(), group.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	fg := &fakeGroups{mgr: mgr, consumer: map[string]group.ConsumerGroupDescription{}}
	s := &Server{log: slog.New(slog.DiscardHandler), groups: fg, node: fakeMeta{img: testImage(t, authorizer)}}
	s.cfg.Security.Authorizer = authorizer
	return s, fg
}

// roundTrip frames req at its version as a client would, decodes it as
// the connection reader does, runs the handler and returns the response
// as the client decodes it.
func roundTrip(t *testing.T, s *Server, req kmsg.Request) kmsg.Response {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("cid")).AppendRequest(nil, req, 7)
	hdr, kreq, err := decodeRequest(frame[4:], nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	c := &conn{s: s, nc: addrConn{}}
	rep := handlers[hdr.key].handle(s, &request{hdr: hdr, kreq: kreq, conn: c})
	res := rep.resolve(make(chan struct{}))
	if res == nil || res.msg == nil {
		t.Fatal("no response")
	}
	out := req.ResponseKind()
	out.SetVersion(req.GetVersion())
	if err := out.ReadFrom(res.msg.AppendTo(nil)); err != nil {
		t.Fatalf("re-reading the response: %v", err)
	}
	return out
}

func TestConsumerHeartbeatRequestMapping(t *testing.T) {
	regex := "^a.*"
	inst, rack, assignor := "i-1", "r-1", "range"
	for _, tc := range []struct {
		name   string
		topics []kmsg.ConsumerGroupHeartbeatRequestTopic
		want   group.Assignment
	}{
		{"nil owned stays nil", nil, nil},
		{"empty owned stays empty", []kmsg.ConsumerGroupHeartbeatRequestTopic{}, group.Assignment{}},
		{"owned sorted and merged", []kmsg.ConsumerGroupHeartbeatRequestTopic{
			{TopicID: testTopicA, Partitions: []int32{2, 0}},
			{TopicID: testTopicB, Partitions: []int32{}},
			{TopicID: testTopicA, Partitions: []int32{1, 2}},
		}, group.Assignment{group.TopicID(testTopicA): {0, 1, 2}, group.TopicID(testTopicB): {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fg := newConsumerTestServer(t, false)
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group, req.MemberID, req.MemberEpoch = "g", "m-1", 4
			req.InstanceID, req.RackID, req.ServerAssignor = &inst, &rack, &assignor
			req.RebalanceTimeoutMillis = 30_000
			req.SubscribedTopicNames, req.SubscribedTopicRegex = []string{"a", "b"}, &regex
			req.Topics = tc.topics
			resp := roundTrip(t, s, req).(*kmsg.ConsumerGroupHeartbeatResponse)
			if len(fg.heartbeats) != 1 {
				t.Fatalf("%d heartbeats reached the coordinator", len(fg.heartbeats))
			}
			got := fg.heartbeats[0]
			want := group.ConsumerHeartbeatRequest{
				Version: 1, Group: "g", MemberID: "m-1", MemberEpoch: 4,
				InstanceID: &inst, RackID: &rack, RebalanceTimeout: 30 * time.Second,
				SubscribedTopicNames: []string{"a", "b"}, SubscribedTopicRegex: &regex, ServerAssignor: &assignor,
				Owned: tc.want, ClientID: "cid", ClientHost: "/127.0.0.9",
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("coordinator got\n%+v\nwant\n%+v", got, want)
			}
			if (got.Owned == nil) != (tc.want == nil) {
				t.Fatalf("owned nil-ness lost: %#v", got.Owned)
			}
			// The contract's Manager answers COORDINATOR_NOT_AVAILABLE
			// until SetTopics: the error travels with its message.
			if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code || resp.ErrorMessage == nil || resp.Assignment != nil {
				t.Fatalf("response %+v", resp)
			}
		})
	}
}

func TestConsumerHeartbeatUnchangedFields(t *testing.T) {
	s, fg := newConsumerTestServer(t, false)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest() // v0, everything null
	req.Group, req.MemberID, req.MemberEpoch = "g", "m", 7
	roundTrip(t, s, req)
	got := fg.heartbeats[0]
	if got.Version != 0 || got.RebalanceTimeout >= 0 || got.SubscribedTopicNames != nil || got.SubscribedTopicRegex != nil ||
		got.Owned != nil || got.InstanceID != nil || got.ServerAssignor != nil {
		t.Fatalf("null fields must stay unchanged markers: %+v", got)
	}
}

func TestConsumerHeartbeatRefusals(t *testing.T) {
	long := strings.Repeat("x", maxHeartbeatRegexLen+1)
	many := make([]string, maxHeartbeatSubscribed+1)
	for i := range many {
		many[i] = fmt.Sprint("t", i)
	}
	for _, tc := range []struct {
		name       string
		authorizer bool
		stale      error
		group      string
		mod        func(*kmsg.ConsumerGroupHeartbeatRequest)
		code       int16
	}{
		{"authz", true, nil, "other", nil, kerr.GroupAuthorizationFailed.Code},
		{"stale", false, group.ErrNotCoordinator, "g", nil, kerr.NotCoordinator.Code},
		{"regex too long", false, nil, "g", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = &long }, kerr.InvalidRequest.Code},
		{"too many topics", false, nil, "g", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = many }, kerr.InvalidRequest.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fg := newConsumerTestServer(t, tc.authorizer)
			fg.stale = tc.stale
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group = 1, tc.group
			if tc.mod != nil {
				tc.mod(req)
			}
			resp := roundTrip(t, s, req).(*kmsg.ConsumerGroupHeartbeatResponse)
			if resp.ErrorCode != tc.code || resp.ErrorMessage == nil || len(fg.heartbeats) != 0 {
				t.Fatalf("code %d (want %d) message %v, %d heartbeats reached the coordinator", resp.ErrorCode, tc.code, resp.ErrorMessage, len(fg.heartbeats))
			}
		})
	}
	// The authorized group passes the same check.
	s, fg := newConsumerTestServer(t, true)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group = 1, "ok"
	roundTrip(t, s, req)
	if len(fg.heartbeats) != 1 {
		t.Fatal("an authorized heartbeat did not reach the coordinator")
	}
}

func TestConsumerHeartbeatResponseMapping(t *testing.T) {
	wire := func(res group.ConsumerHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.Version = 1
		fillHeartbeatResponse(resp, res)
		out := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		out.Version = 1
		if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := group.TopicID(testTopicA), group.TopicID(testTopicB)
	resp := wire(group.ConsumerHeartbeatResponse{MemberID: "m", MemberEpoch: 5, HeartbeatInterval: 1500 * time.Millisecond,
		HasAssignment: true, Assignment: group.Assignment{a: {2, 0}, b: {0}}})
	if resp.ErrorCode != 0 || resp.ErrorMessage != nil || resp.MemberID == nil || *resp.MemberID != "m" ||
		resp.MemberEpoch != 5 || resp.HeartbeatIntervalMillis != 1500 || resp.Assignment == nil {
		t.Fatalf("response %+v", resp)
	}
	// Topics by id (b's id sorts first), partitions ascending.
	want := []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{{TopicID: b, Partitions: []int32{0}}, {TopicID: a, Partitions: []int32{0, 2}}}
	if !reflect.DeepEqual(resp.Assignment.Topics, want) {
		t.Fatalf("assignment %+v, want %+v", resp.Assignment.Topics, want)
	}
	// Unchanged assignment: null. Changed to nothing: empty, not null.
	if resp := wire(group.ConsumerHeartbeatResponse{MemberID: "m", MemberEpoch: 5}); resp.Assignment != nil {
		t.Fatalf("unchanged assignment sent: %+v", resp.Assignment)
	}
	if resp := wire(group.ConsumerHeartbeatResponse{MemberID: "m", MemberEpoch: 6, HasAssignment: true}); resp.Assignment == nil || len(resp.Assignment.Topics) != 0 {
		t.Fatalf("empty assignment: %+v", resp.Assignment)
	}
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{group.ErrFencedMemberEpoch, kerr.FencedMemberEpoch.Code},
		{group.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID.Code},
		{group.ErrUnsupportedAssignor, kerr.UnsupportedAssignor.Code},
		{group.ErrStaleMemberEpoch, kerr.StaleMemberEpoch.Code},
		{fmt.Errorf("%w: bad (", group.ErrInvalidRegularExpression), kerr.InvalidRegularExpression.Code},
		{fmt.Errorf("%w: SubscribedTopicNames missing on join", group.ErrInvalidRequest), kerr.InvalidRequest.Code},
		{group.ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached.Code},
		{group.ErrUnknownMemberID, kerr.UnknownMemberID.Code},
	} {
		resp := wire(group.ConsumerHeartbeatResponse{Err: tc.err})
		if resp.ErrorCode != tc.code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.err.Error() {
			t.Errorf("%v: code %d message %v, want %d", tc.err, resp.ErrorCode, resp.ErrorMessage, tc.code)
		}
	}
	// A non-group error does not send its text (it may name files).
	resp = wire(group.ConsumerHeartbeatResponse{Err: errors.New("open /var/lib/ringlog/x: EIO")})
	if resp.ErrorCode != kerr.UnknownServerError.Code || resp.ErrorMessage == nil || strings.Contains(*resp.ErrorMessage, "/var") {
		t.Fatalf("unknown error leaked: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
}

func TestConsumerGroupDescribeMapping(t *testing.T) {
	for _, v := range []int16{0, 1} {
		s, fg := newConsumerTestServer(t, true)
		regex := "^a$"
		fg.consumer["ok"] = group.ConsumerGroupDescription{
			Group: "ok", State: group.ConsumerReconciling, GroupEpoch: 9, AssignmentEpoch: 8, Assignor: "uniform",
			Members: []group.ConsumerMemberDescription{{
				MemberID: "m1", MemberEpoch: 8, ClientID: "c", ClientHost: "/h", SubscribedTopicRegex: &regex,
				Assignment: group.Assignment{group.TopicID(testTopicB): {0}, group.TopicID(testTopicA): {2, 1},
					{0xde, 0xad}: {0}}, // deleted topic: left out
				TargetAssignment: group.Assignment{group.TopicID(testTopicA): {1}},
			}},
		}
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = v
		req.Groups = []string{"ok", "other"}
		resp := roundTrip(t, s, req).(*kmsg.ConsumerGroupDescribeResponse)
		if len(resp.Groups) != 2 || len(fg.described) != 1 {
			t.Fatalf("v%d: %d groups, %d reached the coordinator", v, len(resp.Groups), len(fg.described))
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 || g.State != "Reconciling" || g.Epoch != 9 || g.AssignmentEpoch != 8 || g.AssignorName != "uniform" ||
			g.AuthorizedOperations != -2147483648 || len(g.Members) != 1 {
			t.Fatalf("v%d: group %+v", v, g)
		}
		m := g.Members[0]
		wantType := int8(-1) // v0 does not carry it
		if v >= 1 {
			wantType = 1
		}
		if m.MemberID != "m1" || m.MemberEpoch != 8 || len(m.SubscribedTopics) != 0 ||
			m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex != regex || m.MemberType != wantType {
			t.Fatalf("v%d: member %+v", v, m)
		}
		want := []kmsg.AssignmentTopicPartition{
			{TopicID: testTopicA, Topic: "a", Partitions: []int32{1, 2}},
			{TopicID: testTopicB, Topic: "b", Partitions: []int32{0}},
		}
		if !reflect.DeepEqual(m.Assignment.TopicPartitions, want) {
			t.Fatalf("v%d: assignment %+v", v, m.Assignment.TopicPartitions)
		}
		if tp := m.TargetAssignment.TopicPartitions; len(tp) != 1 || tp[0].Topic != "a" {
			t.Fatalf("v%d: target %+v", v, tp)
		}
		if g := resp.Groups[1]; g.Group != "other" || g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("v%d: unauthorized group %+v", v, g)
		}
	}
	// Not found (or classic) groups keep the coordinator's error.
	s, _ := newConsumerTestServer(t, false)
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"nope"}
	resp := roundTrip(t, s, req).(*kmsg.ConsumerGroupDescribeResponse)
	if g := resp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil {
		t.Fatalf("unknown group %+v", g)
	}
}

func TestListGroupsV5TypeFilter(t *testing.T) {
	s, fg := newConsumerTestServer(t, false)
	fg.listing = []group.GroupListing{
		{Group: "c1", ProtocolType: "consumer", State: "Stable", GroupType: group.GroupTypeClassic},
		{Group: "n1", ProtocolType: "consumer", State: "Reconciling", GroupType: group.GroupTypeConsumer},
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	req.StatesFilter, req.TypesFilter = []string{"reconciling"}, []string{"Consumer"}
	resp := roundTrip(t, s, req).(*kmsg.ListGroupsResponse)
	if len(fg.listed) != 1 || !reflect.DeepEqual(fg.listed[0], [2][]string{{"reconciling"}, {"Consumer"}}) {
		t.Fatalf("filters reaching the coordinator: %v", fg.listed)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].Group != "n1" || resp.Groups[0].GroupType != "consumer" || resp.Groups[0].GroupState != "Reconciling" {
		t.Fatalf("groups %+v", resp.Groups)
	}
	// v4 knows no type filter: none reaches the coordinator.
	req.Version = 4
	roundTrip(t, s, req)
	if fg.listed[1][1] != nil {
		t.Fatalf("v4 passed a type filter: %v", fg.listed[1])
	}
}

func TestOffsetCommitVersionAndStaleEpoch(t *testing.T) {
	for _, v := range []int16{8, 9} {
		s, fg := newConsumerTestServer(t, false)
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation, req.MemberID = v, "g", 3, "m"
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "a"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 10
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		roundTrip(t, s, req)
		if len(fg.commits) != 1 || fg.commits[0].Version != v || fg.commits[0].Generation != 3 {
			t.Fatalf("v%d: commit reaching the coordinator %+v", v, fg.commits)
		}
	}
	// A stale member epoch is STALE_MEMBER_EPOCH from v9 on only.
	if c := commitErrorCode(group.ErrStaleMemberEpoch, 8); c != kerr.IllegalGeneration.Code {
		t.Fatalf("v8 stale epoch: %d", c)
	}
	if c := commitErrorCode(group.ErrStaleMemberEpoch, 9); c != kerr.StaleMemberEpoch.Code {
		t.Fatalf("v9 stale epoch: %d", c)
	}
	if c := commitErrorCode(group.ErrUnknownMemberID, 8); c != kerr.UnknownMemberID.Code {
		t.Fatalf("v8 unknown member: %d", c)
	}
}

func TestOffsetFetchV9MemberFields(t *testing.T) {
	s, fg := newConsumerTestServer(t, false)
	member := "m-1"
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	for i, epoch := range []int32{5, 3} {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = fmt.Sprint("g", i)
		g.MemberID, g.MemberEpoch = &member, epoch
		req.Groups = append(req.Groups, g)
	}
	anon := kmsg.NewOffsetFetchRequestGroup() // no member: no check
	anon.Group = "g2"
	req.Groups = append(req.Groups, anon)
	resp := roundTrip(t, s, req).(*kmsg.OffsetFetchResponse)
	want := []group.FetchOptions{{MemberID: "m-1", MemberEpoch: 5}, {MemberID: "m-1", MemberEpoch: 3}, {MemberEpoch: -1}}
	if !reflect.DeepEqual(fg.fetchOpts, want) {
		t.Fatalf("fetch options %+v, want %+v", fg.fetchOpts, want)
	}
	if resp.Groups[0].ErrorCode != 0 || resp.Groups[1].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("group errors %d %d", resp.Groups[0].ErrorCode, resp.Groups[1].ErrorCode)
	}
	// v8 has no member fields: never a check.
	fg.fetchOpts = nil
	req.Version = 8
	roundTrip(t, s, req)
	for _, o := range fg.fetchOpts {
		if o.MemberID != "" || o.MemberEpoch != -1 {
			t.Fatalf("v8 passed member fields: %+v", fg.fetchOpts)
		}
	}
}

func TestApiVersionsAdvertisesConsumerProtocol(t *testing.T) {
	resp := apiVersionsResponse(3, 0)
	want := map[int16][2]int16{68: {0, 1}, 69: {0, 1}, 8: {0, 9}, 9: {0, 9}, 15: {0, 6}, 16: {0, 5}}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("key %d: v%d-%d, want v%d-%d", k.ApiKey, k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not advertised: %v", want)
	}
}

// consumerSeeds are filled-in consumer-protocol requests for the fuzz
// targets (the empty ones come from the registry).
func consumerSeeds() []kmsg.Request {
	regex, inst := "^orders-.*", "i-1"
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.InstanceID = "g", "m", 0, &inst
	hb.SubscribedTopicNames, hb.SubscribedTopicRegex = []string{"a", "b"}, &regex
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testTopicA, Partitions: []int32{0, 2, 2}}, {TopicID: testTopicB}}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "m", group.LeaveEpoch
	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Version, desc.Groups, desc.IncludeAuthorizedOperations = 1, []string{"g", "", "ok"}, true
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version, lg.StatesFilter, lg.TypesFilter = 5, []string{"Stable"}, []string{"consumer", "classic"}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 9
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID, g.MemberEpoch = "g", &inst, 4
	of.Groups = append(of.Groups, g)
	return []kmsg.Request{hb, leave, desc, lg, of}
}

// FuzzConsumerGroupHandlers runs arbitrary frames of the consumer
// protocol's requests (and the group APIs it changed) through the decoder
// and their handlers with a fake coordinator: whatever arrives on the wire,
// a handler must answer without panicking, with a response that encodes.
func FuzzConsumerGroupHandlers(f *testing.F) {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	keys := []int16{68, 69, 16, 9}
	for _, key := range keys {
		for _, v := range []int16{handlers[key].min, handlers[key].max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			f.Add(fmtr.AppendRequest(nil, req, 1)[4:])
		}
	}
	for _, req := range consumerSeeds() {
		f.Add(fmtr.AppendRequest(nil, req, 1)[4:])
	}
	s, fg := newConsumerTestServer(f, true)
	fg.consumer["ok"] = group.ConsumerGroupDescription{Group: "ok", State: group.ConsumerStable,
		Members: []group.ConsumerMemberDescription{{MemberID: "m", Assignment: group.Assignment{group.TopicID(testTopicA): {0}}}}}
	f.Fuzz(func(t *testing.T, frame []byte) {
		hdr, kreq, err := decodeRequest(frame, nil)
		if err != nil || !slices.Contains(keys, hdr.key) {
			return
		}
		fg.heartbeats, fg.described, fg.listed, fg.fetchOpts = nil, nil, nil, nil
		c := &conn{s: s, nc: addrConn{}}
		rep := handlers[hdr.key].handle(s, &request{hdr: hdr, kreq: kreq, conn: c})
		res := rep.resolve(make(chan struct{}))
		if res == nil || res.msg == nil {
			t.Fatal("no response")
		}
		_ = res.msg.AppendTo(nil)
		for _, hb := range fg.heartbeats {
			if len(hb.SubscribedTopicNames) > maxHeartbeatSubscribed {
				t.Fatalf("%d subscribed topics passed the cap", len(hb.SubscribedTopicNames))
			}
			for _, ps := range hb.Owned {
				if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
					t.Fatalf("owned partitions not sorted and unique: %v", ps)
				}
			}
		}
	})
}
