package results

// AgentResult is one load agent's share of a distributed run. The merged
// Result's histograms are the sum of the agents' parts; a Missing agent
// contributed nothing after the moment it was lost.
type AgentResult struct {
	// Name is the agent's address as the controller dialed it.
	Name     string `json:"name"`
	Hostname string `json:"hostname,omitempty"`
	Cores    int    `json:"cores,omitempty"`
	// Dir is the agent's own result directory under the merged one.
	Dir           string      `json:"dir,omitempty"`
	TargetRate    float64     `json:"target_rate"`
	AchievedRate  float64     `json:"achieved_rate"`
	MessagesSent  int64       `json:"messages_sent"`
	MessagesAcked int64       `json:"messages_acked"`
	Errors        int64       `json:"errors"`
	AckLatencyMs  Percentiles `json:"ack_latency_ms"`
	// Saturated says the agent could not keep its schedule (or fell
	// behind); SaturationReason says how.
	Saturated        bool   `json:"generator_saturated,omitempty"`
	SaturationReason string `json:"saturation_reason,omitempty"`
	// Missing says the agent died, could not be reached, or stopped
	// reporting; MissingReason says which and when.
	Missing       bool   `json:"missing,omitempty"`
	MissingReason string `json:"missing_reason,omitempty"`
}
