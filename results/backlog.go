package results

// BacklogDrain is a consumer backlog-drain workload's outcome: a backlog
// is produced while the consumers are stopped, then the consumers start
// while the producers continue, and the catch-up is measured.
type BacklogDrain struct {
	BacklogBytes    int64   `json:"backlog_bytes"`
	BacklogMessages int64   `json:"backlog_messages"`
	DrainSeconds    float64 `json:"drain_s"`
	// DrainRate is messages consumed per second while draining.
	DrainRate float64 `json:"drain_rate"`
	// Drained is false when the consumers had not caught up by the end.
	Drained bool `json:"drained"`
}
