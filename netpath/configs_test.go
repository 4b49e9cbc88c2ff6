package netpath

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/engine"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApplyConfigOps(t *testing.T) {
	str := func(s string) *string { return &s }
	inherited := func(string) string { return "delete" }
	cur := map[string]string{"retention.ms": "1", "segment.bytes": "2048"}
	next, cerr := applyConfigOps(cur, []configOp{
		{"retention.ms", kmsg.IncrementalAlterConfigOpSet, str("5")},
		{"segment.bytes", kmsg.IncrementalAlterConfigOpDelete, nil},
		{"cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, str("compact")},
	}, false, inherited)
	if cerr != nil {
		t.Fatal(cerr)
	}
	if want := map[string]string{"retention.ms": "5", "cleanup.policy": "delete,compact"}; !maps.Equal(next, want) {
		t.Fatalf("got %v, want %v", next, want)
	}
	if cur["retention.ms"] != "1" {
		t.Fatal("current map modified")
	}
	set, del := diffConfigs(cur, next, false)
	if !maps.Equal(set, map[string]string{"retention.ms": "5", "cleanup.policy": "delete,compact"}) || !slices.Equal(del, []string{"segment.bytes"}) {
		t.Fatalf("diff: set %v delete %v", set, del)
	}
	// SUBTRACT from the set value; APPEND of a present item is a no-op.
	next, _ = applyConfigOps(next, []configOp{
		{"cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, str("delete")},
		{"retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil},
	}, false, inherited)
	next, _ = applyConfigOps(next, []configOp{{"cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, str("compact")}}, false, inherited)
	if !maps.Equal(next, map[string]string{"cleanup.policy": "compact"}) {
		t.Fatalf("after subtract: %v", next)
	}
	// Replace starts empty.
	next, _ = applyConfigOps(cur, []configOp{{"retention.ms", kmsg.IncrementalAlterConfigOpSet, str("9")}}, true, inherited)
	if !maps.Equal(next, map[string]string{"retention.ms": "9"}) {
		t.Fatalf("replace: %v", next)
	}
	for _, tc := range []struct {
		op   configOp
		code int16
	}{
		{configOp{"retention.ms", kmsg.IncrementalAlterConfigOpAppend, str("1")}, kerr.InvalidConfig.Code},
		{configOp{"retention.ms", kmsg.IncrementalAlterConfigOpSet, nil}, kerr.InvalidConfig.Code},
		{configOp{"cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, nil}, kerr.InvalidConfig.Code},
		{configOp{"retention.ms", 9, str("1")}, kerr.InvalidRequest.Code},
	} {
		if _, cerr := applyConfigOps(cur, []configOp{tc.op}, false, inherited); cerr == nil || cerr.code != tc.code {
			t.Fatalf("%+v: %v, want code %d", tc.op, cerr, tc.code)
		}
	}
	// A resource named twice fails both times without being looked at (a
	// bare Server would panic if it were).
	errs := (&Server{}).alterConfigResources(nil, 2, func(int) (kmsg.ConfigResourceType, string, []configOp) {
		return kmsg.ConfigResourceTypeTopic, "a", nil
	}, false, false)
	for _, e := range errs {
		if e == nil || e.code != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate resource: %v", e)
		}
	}
}

// Tiered-storage topic configs: validated by the engine's rules, and
// remote.storage.enable cannot be turned off once on, whether by SET,
// DELETE or a replacing AlterConfigs that leaves it out.
func TestCheckTopicConfigsRemoteStorage(t *testing.T) {
	str := func(s string) *string { return &s }
	defaults := engine.DefaultTopicConfig()
	inherited := func(string) string { return "" }
	on := map[string]string{"remote.storage.enable": "true", "local.retention.ms": "60000"}
	if cfg, cerr := checkTopicConfigs(defaults, nil, on); cerr != nil || !cfg.RemoteStorageEnable {
		t.Fatalf("turning it on: %v", cerr)
	}
	for name, tc := range map[string]struct {
		ops     []configOp
		replace bool
	}{
		"set false": {ops: []configOp{{"remote.storage.enable", kmsg.IncrementalAlterConfigOpSet, str("false")}}},
		"delete":    {ops: []configOp{{"remote.storage.enable", kmsg.IncrementalAlterConfigOpDelete, nil}}},
		"replace":   {ops: []configOp{{"retention.ms", kmsg.IncrementalAlterConfigOpSet, str("1000")}}, replace: true},
	} {
		next, cerr := applyConfigOps(on, tc.ops, tc.replace, inherited)
		if cerr != nil {
			t.Fatal(cerr)
		}
		if _, cerr := checkTopicConfigs(defaults, on, next); cerr == nil || cerr.code != kerr.InvalidConfig.Code || !strings.Contains(cerr.msg, "cannot be turned off") {
			t.Fatalf("%s: %v, want INVALID_CONFIG", name, cerr)
		}
	}
	next, _ := applyConfigOps(on, []configOp{{"local.retention.ms", kmsg.IncrementalAlterConfigOpSet, str("120000")}}, false, inherited)
	if cfg, cerr := checkTopicConfigs(defaults, on, next); cerr != nil || cfg.LocalRetentionMs != 120000 {
		t.Fatalf("changing the window: %v", cerr)
	}
	next, _ = applyConfigOps(on, []configOp{{"retention.ms", kmsg.IncrementalAlterConfigOpSet, str("1000")}}, false, inherited)
	if _, cerr := checkTopicConfigs(defaults, on, next); cerr == nil || cerr.code != kerr.InvalidConfig.Code || !strings.Contains(cerr.msg, "local.retention.ms=60000 is more than retention.ms=1000") {
		t.Fatalf("total below the window: %v", cerr)
	}
}

// Without an object store (Config.RemoteStorage false) turning
// remote.storage.enable on is refused with INVALID_CONFIG, for a new topic
// and for an alter; a topic already tiered keeps being alterable, and a
// broker with a store accepts it.
func TestCheckRemoteStorageNeedsObjectStore(t *testing.T) {
	on := engine.TopicConfig{RemoteStorageEnable: true}
	off := engine.TopicConfig{}
	without, with := &Server{}, &Server{cfg: Config{RemoteStorage: true}}
	for _, tc := range []struct {
		name    string
		s       *Server
		next    engine.TopicConfig
		old     *engine.TopicConfig
		refused bool
	}{
		{"create on, no store", without, on, nil, true},
		{"alter off to on, no store", without, on, &off, true},
		{"create off, no store", without, off, nil, false},
		{"alter of a tiered topic, no store", without, on, &on, false},
		{"create on, store", with, on, nil, false},
		{"alter off to on, store", with, on, &off, false},
	} {
		cerr := tc.s.checkRemoteStorage(tc.next, tc.old)
		if (cerr != nil) != tc.refused {
			t.Fatalf("%s: %v, want refused %v", tc.name, cerr, tc.refused)
		}
		if cerr != nil && (cerr.code != kerr.InvalidConfig.Code || !strings.Contains(cerr.msg, "remote.storage.enable needs an object store") || !strings.Contains(cerr.msg, "--object-store-endpoint")) {
			t.Fatalf("%s: code %d message %q", tc.name, cerr.code, cerr.msg)
		}
	}
}
