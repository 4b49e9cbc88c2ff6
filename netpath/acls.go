package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
)

// aclFilter builds a metadata filter from the fields every ACL filter
// request carries.
func aclFilter(resourceType int8, name *string, pattern int8, principal, host *string, op, perm int8) metadata.ACLFilter {
	return metadata.ACLFilter{ResourceType: resourceType, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: host, Operation: op, Permission: perm}
}

// validFilter reports whether a filter's enum values are known (UNKNOWN,
// 0, and out-of-range values are refused as Kafka refuses them).
func validFilter(f metadata.ACLFilter) bool {
	return f.ResourceType >= metadata.ResourceAny && f.ResourceType <= metadata.ResourceTransactionalID &&
		f.PatternType >= metadata.PatternAny && f.PatternType <= metadata.PatternPrefixed &&
		f.Operation >= metadata.OpAny && f.Operation <= metadata.OpIdempotentWrite &&
		f.Permission >= metadata.PermissionAny && f.Permission <= metadata.PermissionAllow
}
