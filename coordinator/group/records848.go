package group

// __consumer_offsets records of consumer (KIP-848) groups, in Kafka's
// formats (key versions 3, 5, 6, 7, 8; version 4 is read and skipped).
// CONTRACT STUB: the RECORDS part replaces this file.

// ConsumerGroupMetadataKV is ConsumerGroupMetadata{Key,Value}: the group
// epoch. tombstone writes the key with a nil value.
func ConsumerGroupMetadataKV(group string, epoch int32, tombstone bool) KV {
	panic("unimplemented")
}

// ConsumerTargetMetadataKV is ConsumerGroupTargetAssignmentMetadata: the
// epoch of the target assignment.
func ConsumerTargetMetadataKV(group string, assignmentEpoch int32, tombstone bool) KV {
	panic("unimplemented")
}

// ConsumerMemberKV is ConsumerGroupMemberMetadata; nil r is a tombstone.
func ConsumerMemberKV(group, memberID string, r *ConsumerMemberRecord) KV {
	panic("unimplemented")
}

// ConsumerTargetMemberKV is ConsumerGroupTargetAssignmentMember: one
// member's target assignment.
func ConsumerTargetMemberKV(group, memberID string, a Assignment, tombstone bool) KV {
	panic("unimplemented")
}

// ConsumerCurrentAssignmentKV is ConsumerGroupCurrentMemberAssignment; nil
// r is a tombstone.
func ConsumerCurrentAssignmentKV(group, memberID string, r *ConsumerAssignmentRecord) KV {
	panic("unimplemented")
}
