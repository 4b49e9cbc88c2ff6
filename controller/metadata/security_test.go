package metadata

import (
	"bytes"
	"errors"
	"testing"
)

func applyOK(t *testing.T, im *Image, c Command) (*Image, Result) {
	t.Helper()
	next, res := im.Apply(im.Index()+1, c)
	if res.Err != nil {
		t.Fatalf("apply: %v", res.Err)
	}
	return next, res
}

func TestScramCredentialsApply(t *testing.T) {
	im := EmptyImage()
	alice := ScramCredential{User: "alice", Mechanism: "SCRAM-SHA-256", Salt: []byte("s"), StoredKey: []byte("k1"), ServerKey: []byte("k2"), Iterations: 4096}
	im2, res := applyOK(t, im, Command{AlterScramCredentials: &AlterScramCredentials{
		Upserts:   []ScramCredential{alice, {User: "", Mechanism: "SCRAM-SHA-256"}},
		Deletions: []ScramKey{{"bob", "SCRAM-SHA-512"}},
	}})
	if len(res.ItemErrs) != 3 || !errors.Is(res.ItemErrs[0], ErrNoScramCredential) || res.ItemErrs[1] != nil || !errors.Is(res.ItemErrs[2], ErrInvalidCommand) {
		t.Fatalf("item errors %v", res.ItemErrs)
	}
	if _, ok := im.ScramCredential("alice", "SCRAM-SHA-256"); ok {
		t.Fatal("the old image changed")
	}
	got, ok := im2.ScramCredential("alice", "SCRAM-SHA-256")
	if !ok || !bytes.Equal(got.StoredKey, alice.StoredKey) {
		t.Fatalf("credential %+v %v", got, ok)
	}
	im3, res := applyOK(t, im2, Command{AlterScramCredentials: &AlterScramCredentials{Deletions: []ScramKey{{"alice", "SCRAM-SHA-256"}}}})
	if res.ItemErrs[0] != nil {
		t.Fatal(res.ItemErrs[0])
	}
	if _, ok := im3.ScramCredential("alice", "SCRAM-SHA-256"); ok {
		t.Fatal("deleted credential still there")
	}
	// Snapshots keep credentials and ACLs.
	im4, _ := applyOK(t, im2, Command{CreateACLs: &CreateACLs{ACLs: []ACL{{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: "User:alice", Host: "*", Operation: OpRead, Permission: PermissionAllow}}}})
	var buf bytes.Buffer
	if err := im4.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(im4) {
		t.Fatal("snapshot lost credentials or ACLs")
	}
	if back.Equal(im2) {
		t.Fatal("Equal ignores ACLs")
	}
}

func TestAuthorize(t *testing.T) {
	allow := func(rt int8, name string, pt int8, principal string, op int8) ACL {
		return ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: PermissionAllow}
	}
	deny := func(rt int8, name string, pt int8, principal string, op int8) ACL {
		a := allow(rt, name, pt, principal, op)
		a.Permission = PermissionDeny
		return a
	}
	im, res := applyOK(t, EmptyImage(), Command{CreateACLs: &CreateACLs{ACLs: []ACL{
		allow(ResourceTopic, "orders", PatternLiteral, "User:alice", OpWrite),
		allow(ResourceTopic, "logs-", PatternPrefixed, "User:alice", OpRead),
		deny(ResourceTopic, "logs-secret", PatternLiteral, "User:alice", OpAll),
		allow(ResourceGroup, "*", PatternLiteral, "User:*", OpRead),
		allow(ResourceCluster, ClusterResourceName, PatternLiteral, "User:admin", OpAll),
		{ResourceType: ResourceTopic, ResourceName: "x", PatternType: PatternLiteral, Principal: "alice", Host: "*", Operation: OpRead, Permission: PermissionAllow},
	}}})
	if !errors.Is(res.ItemErrs[5], ErrInvalidACL) {
		t.Fatalf("principal without User: accepted: %v", res.ItemErrs)
	}
	for _, tc := range []struct {
		principal string
		op, rt    int8
		name      string
		want      bool
	}{
		{"User:alice", OpWrite, ResourceTopic, "orders", true},
		{"User:alice", OpDescribe, ResourceTopic, "orders", true}, // implied by WRITE
		{"User:alice", OpRead, ResourceTopic, "orders", false},
		{"User:bob", OpWrite, ResourceTopic, "orders", false},
		{"User:alice", OpRead, ResourceTopic, "logs-app", true},
		{"User:alice", OpRead, ResourceTopic, "logs-secret", false}, // deny wins
		{"User:alice", OpRead, ResourceTopic, "log", false},
		{"User:bob", OpRead, ResourceGroup, "any-group", true}, // wildcards
		{"User:admin", OpClusterAction, ResourceCluster, ClusterResourceName, true},
		{"User:alice", OpClusterAction, ResourceCluster, ClusterResourceName, false},
		{"User:alice", OpRead, ResourceTransactionalID, "t", false}, // no ACL: denied
	} {
		if got := im.Authorize(tc.principal, "127.0.0.1", tc.op, tc.rt, tc.name); got != tc.want {
			t.Errorf("%s op %d on %d/%s: %v, want %v", tc.principal, tc.op, tc.rt, tc.name, got, tc.want)
		}
	}
	// DeleteACLs with a MATCH filter removes what applies to a name.
	name := "logs-secret"
	im2, res := applyOK(t, im, Command{DeleteACLs: &DeleteACLs{Filters: []ACLFilter{{ResourceType: ResourceTopic, ResourceName: &name, PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}}}})
	if len(res.Deleted[0]) != 2 {
		t.Fatalf("deleted %v, want the prefixed allow and the literal deny", res.Deleted[0])
	}
	if len(im2.ACLs(ACLFilter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny})) != 3 {
		t.Fatal("wrong ACLs left")
	}
}
