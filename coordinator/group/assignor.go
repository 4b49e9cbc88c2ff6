package group

// Server-side assignors of the consumer protocol (KIP-848).
// CONTRACT STUB: the ASSIGNORS part replaces this file.

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	MemberID   string
	InstanceID *string
	RackID     *string
	// Subscribed is the member's resolved subscription (names and regex),
	// sorted, holding only topics that exist.
	Subscribed []TopicID
	// Current is the member's current target assignment, for stickiness.
	Current Assignment
}

// AssignSpec is an assignor's input.
type AssignSpec struct {
	Members []AssignMember // sorted by MemberID
	Topics  map[TopicID]TopicInfo
}

// Assignor computes a target assignment: every partition of every topic
// some member subscribes to goes to exactly one member subscribed to it.
// It must be deterministic (same spec, same result).
type Assignor interface {
	Name() string
	// Assign returns an entry for every member (empty when it gets none).
	Assign(spec *AssignSpec) map[string]Assignment
}

// NewAssignor returns the assignor called name ("uniform" or "range").
func NewAssignor(name string) (Assignor, bool) {
	return nil, false
}
