package controller

import (
	"errors"
	"testing"

	"github.com/ringlog/ringlog/controller/metadata"
)

// TestSecurityCommandsThroughFollower alters credentials and ACLs through
// a node that is not the controller: the items' outcomes (with their
// sentinel errors) come back, and every node's image shows the result.
func TestSecurityCommandsThroughFollower(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	waitReady(t, nodes...)
	leader := leaderOf(t, nodes)
	var via *Node
	for _, n := range nodes {
		if n != leader {
			via = n
		}
	}
	cred := metadata.ScramCredential{User: "alice", Mechanism: "SCRAM-SHA-512", Salt: []byte("salt"), StoredKey: []byte("sk"), ServerKey: []byte("vk"), Iterations: 4096}
	errs, err := via.AlterScramCredentials(ctxT(t), metadata.AlterScramCredentials{
		Deletions: []metadata.ScramKey{{User: "nobody", Mechanism: "SCRAM-SHA-256"}},
		Upserts:   []metadata.ScramCredential{cred},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || !errors.Is(errs[0], metadata.ErrNoScramCredential) || errs[1] != nil {
		t.Fatalf("item errors %v", errs)
	}
	acl := metadata.ACL{ResourceType: metadata.ResourceTopic, ResourceName: "t", PatternType: metadata.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: metadata.OpRead, Permission: metadata.PermissionAllow}
	bad := acl
	bad.Principal = "alice"
	errs, err = via.CreateACLs(ctxT(t), []metadata.ACL{acl, bad})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], metadata.ErrInvalidACL) {
		t.Fatalf("acl item errors %v", errs)
	}
	checkFor(t, 10e9, func() error {
		for _, n := range nodes {
			im := n.MetadataImage()
			if _, ok := im.ScramCredential("alice", "SCRAM-SHA-512"); !ok {
				return errors.New("credential not applied everywhere")
			}
			if !im.Authorize("User:alice", "10.0.0.1", metadata.OpRead, metadata.ResourceTopic, "t") {
				return errors.New("acl not applied everywhere")
			}
		}
		return nil
	})
	name := "t"
	deleted, err := via.DeleteACLs(ctxT(t), []metadata.ACLFilter{{ResourceType: metadata.ResourceTopic, ResourceName: &name,
		PatternType: metadata.PatternLiteral, Operation: metadata.OpAny, Permission: metadata.PermissionAny}})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 1 || deleted[0][0] != acl {
		t.Fatalf("deleted %v, %v", deleted, err)
	}
}
