package group

// The consumer (KIP-848) group protocol.
// CONTRACT STUB: the CORE part replaces this file.

// SetTopics gives the Manager the broker's topic view; consumer-protocol
// heartbeats answer ErrCoordinatorNotAvailable until it is set.
func (m *Manager) SetTopics(t Topics) {}

// ConsumerHeartbeat answers ConsumerGroupHeartbeat. The future resolves
// once the records the heartbeat produced are durable.
func (m *Manager) ConsumerHeartbeat(req ConsumerHeartbeatRequest) *Future[ConsumerHeartbeatResponse] {
	return resolved(ConsumerHeartbeatResponse{Err: ErrCoordinatorNotAvailable})
}

// ConsumerDescribe answers ConsumerGroupDescribe.
func (m *Manager) ConsumerDescribe(groupIDs []string) []ConsumerGroupDescription {
	out := make([]ConsumerGroupDescription, len(groupIDs))
	for i, id := range groupIDs {
		out[i] = ConsumerGroupDescription{Group: id, Err: ErrGroupIDNotFound, State: ConsumerDead}
	}
	return out
}

// ListFiltered answers ListGroups v5: states and types (GroupTypeClassic,
// GroupTypeConsumer; case-insensitive) filter when non-empty.
func (m *Manager) ListFiltered(states, types []string) ([]GroupListing, error) {
	return m.List(states)
}
