package metadata

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SCRAM credentials and ACLs live in the metadata log like topics: every
// broker applies them and authenticates and authorizes from its own image.
// Numeric codes are Kafka's, so netpath passes them through unchanged.

// ScramCredential is one user's salted SCRAM secret for one mechanism
// (never the password).
type ScramCredential struct {
	User       string
	Mechanism  string // "SCRAM-SHA-256" | "SCRAM-SHA-512"
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// ScramKey names a credential.
type ScramKey struct{ User, Mechanism string }

// AlterScramCredentials upserts and deletes credentials in one command.
// Each item's outcome is in Result.ItemErrs, in Deletions-then-Upserts
// order; the command as a whole never fails on an item.
type AlterScramCredentials struct {
	Deletions []ScramKey
	Upserts   []ScramCredential
}

// Kafka's resource types, pattern types, operations and permissions.
const (
	ResourceAny             int8 = 1
	ResourceTopic           int8 = 2
	ResourceGroup           int8 = 3
	ResourceCluster         int8 = 4
	ResourceTransactionalID int8 = 5

	PatternAny      int8 = 1
	PatternMatch    int8 = 2
	PatternLiteral  int8 = 3
	PatternPrefixed int8 = 4

	OpAny             int8 = 1
	OpAll             int8 = 2
	OpRead            int8 = 3
	OpWrite           int8 = 4
	OpCreate          int8 = 5
	OpDelete          int8 = 6
	OpAlter           int8 = 7
	OpDescribe        int8 = 8
	OpClusterAction   int8 = 9
	OpDescribeConfigs int8 = 10
	OpAlterConfigs    int8 = 11
	OpIdempotentWrite int8 = 12

	PermissionAny   int8 = 1
	PermissionDeny  int8 = 2
	PermissionAllow int8 = 3
)

// ClusterResourceName is the only name a Cluster resource has.
const ClusterResourceName = "kafka-cluster"

// WildcardName matches every resource name of a literal ACL; WildcardHost
// and WildcardPrincipal ("User:*") every host and principal.
const (
	WildcardName      = "*"
	WildcardHost      = "*"
	WildcardPrincipal = "User:*"
)

// ACL is one access control entry bound to a resource pattern.
type ACL struct {
	ResourceType int8
	ResourceName string
	PatternType  int8 // literal or prefixed
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// ACLFilter selects ACLs (DescribeAcls, DeleteAcls): Any values and
// empty/nil strings match everything; PatternMatch matches the ACLs that
// would apply to the literal ResourceName.
type ACLFilter struct {
	ResourceType int8
	ResourceName *string
	PatternType  int8
	Principal    *string
	Host         *string
	Operation    int8
	Permission   int8
}

// CreateACLs adds bindings (an existing identical one is not duplicated).
type CreateACLs struct{ ACLs []ACL }

// DeleteACLs removes every binding matching any filter; Result.Deleted
// lists them per filter.
type DeleteACLs struct{ Filters []ACLFilter }

func validACL(a ACL) error {
	switch {
	case a.ResourceType < ResourceTopic || a.ResourceType > ResourceTransactionalID:
		return fmt.Errorf("%w: resource type %d", ErrInvalidACL, a.ResourceType)
	case a.PatternType != PatternLiteral && a.PatternType != PatternPrefixed:
		return fmt.Errorf("%w: pattern type %d", ErrInvalidACL, a.PatternType)
	case a.ResourceName == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalidACL)
	case a.ResourceType == ResourceCluster && a.ResourceName != ClusterResourceName:
		return fmt.Errorf("%w: the cluster resource is named %q", ErrInvalidACL, ClusterResourceName)
	case a.Operation < OpAll || a.Operation > OpIdempotentWrite:
		return fmt.Errorf("%w: operation %d", ErrInvalidACL, a.Operation)
	case a.Permission != PermissionDeny && a.Permission != PermissionAllow:
		return fmt.Errorf("%w: permission %d", ErrInvalidACL, a.Permission)
	case !strings.HasPrefix(a.Principal, "User:") || len(a.Principal) == len("User:"):
		return fmt.Errorf("%w: principal %q (want User:<name>)", ErrInvalidACL, a.Principal)
	case a.Host == "":
		return fmt.Errorf("%w: empty host (use *)", ErrInvalidACL)
	}
	return nil
}

func compareACL(a, b ACL) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType), cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

func (t *txn) alterScram(c *AlterScramCredentials) Result {
	var res Result
	next := maps.Clone(t.im.scram)
	if next == nil {
		next = map[ScramKey]ScramCredential{}
	}
	for _, d := range c.Deletions {
		if _, ok := next[d]; !ok {
			res.ItemErrs = append(res.ItemErrs, fmt.Errorf("%w: %s has no %s credential", ErrNoScramCredential, d.User, d.Mechanism))
			continue
		}
		delete(next, d)
		res.ItemErrs = append(res.ItemErrs, nil)
	}
	for _, u := range c.Upserts {
		if u.User == "" || (u.Mechanism != "SCRAM-SHA-256" && u.Mechanism != "SCRAM-SHA-512") || len(u.StoredKey) == 0 || len(u.ServerKey) == 0 || len(u.Salt) == 0 {
			res.ItemErrs = append(res.ItemErrs, fmt.Errorf("%w: credential for %q with mechanism %q", ErrInvalidCommand, u.User, u.Mechanism))
			continue
		}
		u.Salt, u.StoredKey, u.ServerKey = bytes.Clone(u.Salt), bytes.Clone(u.StoredKey), bytes.Clone(u.ServerKey)
		next[ScramKey{u.User, u.Mechanism}] = u
		res.ItemErrs = append(res.ItemErrs, nil)
	}
	t.im.scram = next
	return res
}

func (t *txn) createACLs(c *CreateACLs) Result {
	var res Result
	next := slices.Clone(t.im.acls)
	for _, a := range c.ACLs {
		if err := validACL(a); err != nil {
			res.ItemErrs = append(res.ItemErrs, err)
			continue
		}
		res.ItemErrs = append(res.ItemErrs, nil)
		if i, found := slices.BinarySearchFunc(next, a, compareACL); !found {
			next = slices.Insert(next, i, a)
		}
	}
	t.im.acls = next
	return res
}

func (t *txn) deleteACLs(c *DeleteACLs) Result {
	var res Result
	next := slices.Clone(t.im.acls)
	res.Deleted = make([][]ACL, len(c.Filters))
	for i, f := range c.Filters {
		next = slices.DeleteFunc(next, func(a ACL) bool {
			if f.Matches(a) {
				res.Deleted[i] = append(res.Deleted[i], a)
				return true
			}
			return false
		})
	}
	t.im.acls = next
	return res
}

// Matches reports whether filter f selects a.
func (f ACLFilter) Matches(a ACL) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.Operation != OpAny && f.Operation != a.Operation {
		return false
	}
	if f.Permission != PermissionAny && f.Permission != a.Permission {
		return false
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == nil || *f.ResourceName == a.ResourceName
	case PatternMatch:
		return f.ResourceName == nil || patternCovers(a, *f.ResourceName)
	default:
		return f.PatternType == a.PatternType && (f.ResourceName == nil || *f.ResourceName == a.ResourceName)
	}
}

// patternCovers reports whether a's resource pattern applies to name.
func patternCovers(a ACL, name string) bool {
	switch a.PatternType {
	case PatternLiteral:
		return a.ResourceName == name || a.ResourceName == WildcardName
	case PatternPrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	}
	return false
}

// ScramCredential returns a user's credential for a mechanism.
func (im *Image) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	c, ok := im.scram[ScramKey{user, mechanism}]
	return c, ok
}

// ScramCredentials lists every credential, sorted by user then mechanism.
func (im *Image) ScramCredentials() []ScramCredential {
	out := slices.Collect(maps.Values(im.scram))
	slices.SortFunc(out, func(a, b ScramCredential) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return out
}

// ACLs returns the bindings matching f.
func (im *Image) ACLs(f ACLFilter) []ACL {
	var out []ACL
	for _, a := range im.acls {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// Authorize decides whether principal (e.g. "User:alice") connecting from
// host may perform op on the named resource, Kafka's way: a matching DENY
// wins over any ALLOW; ALL matches every operation; READ, WRITE, DELETE
// and ALTER imply DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS; no
// matching ALLOW means denied. Super users bypass this in the caller.
func (im *Image) Authorize(principal, host string, op, resourceType int8, name string) bool {
	allowed := false
	for _, a := range im.acls {
		if a.ResourceType != resourceType || !patternCovers(a, name) {
			continue
		}
		if a.Principal != principal && a.Principal != WildcardPrincipal {
			continue
		}
		if a.Host != host && a.Host != WildcardHost {
			continue
		}
		if a.Permission == PermissionDeny {
			if a.Operation == op || a.Operation == OpAll {
				return false
			}
			continue
		}
		if a.Operation == op || a.Operation == OpAll || implies(a.Operation, op) {
			allowed = true
		}
	}
	return allowed
}

func implies(granted, wanted int8) bool {
	switch wanted {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}
