package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// File names inside a result directory.
const (
	ResultFile        = "result.json"
	AckHgrmFile       = "ack.hgrm"
	AckLogFile        = "ack.hlog"
	E2EHgrmFile       = "e2e.hgrm"
	E2ELogFile        = "e2e.hlog"
	SendDelayHgrmFile = "send_delay.hgrm"
	SendDelayLogFile  = "send_delay.hlog"
	HTMLFile          = "report.html"
)

// Result is result.json: everything a reader needs without the histograms.
type Result struct {
	Label     string    `json:"label"`
	StartedAt time.Time `json:"started_at"`
	// DurationS is the measured window (after warmup) in seconds.
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	// Interrupted says the run was stopped (SIGINT, SIGTERM) before its
	// planned end: DurationS and the rates cover the time measured until
	// then. With find_max, the search was stopped.
	Interrupted bool `json:"interrupted,omitempty"`

	TargetRate       float64 `json:"target_rate"`
	AchievedRate     float64 `json:"achieved_rate"`
	ThroughputMBps   float64 `json:"throughput_mb_s"`
	MessageSize      int     `json:"message_size"`
	MessagesSent     int64   `json:"messages_sent"`
	MessagesAcked    int64   `json:"messages_acked"`
	MessagesConsumed int64   `json:"messages_consumed,omitempty"`
	Errors           int64   `json:"errors"`
	// MessagesRetried counts re-sends after retriable failures (leader
	// moves, broken connections, broker errors such as
	// NOT_ENOUGH_REPLICAS or KAFKA_STORAGE_ERROR); their latency runs from
	// the original intended time, so failovers show up in the tail. Lean
	// client only (franz-go does not say how many records it re-sent).
	MessagesRetried int64 `json:"messages_retried,omitempty"`
	// Retries counts produce requests (one partition's batch each, for the
	// lean client) re-sent after a retriable failure, each after a backoff
	// (--retry-backoff, doubling up to --retry-backoff-max). A batch that
	// runs out of retries (--retries) or time (--delivery-timeout) counts
	// its messages in Errors.
	Retries int64 `json:"retries,omitempty"`
	// ErrorMix counts failed produce attempts by cause, retried or not:
	// the Kafka error code name (KAFKA_STORAGE_ERROR,
	// NOT_LEADER_OR_FOLLOWER, ...), CONNECTION_LOST, or OTHER.
	ErrorMix   map[string]int64 `json:"error_mix,omitempty"`
	FirstError string           `json:"first_error,omitempty"`

	AckLatencyMs Percentiles  `json:"ack_latency_ms"`
	E2ELatencyMs *Percentiles `json:"e2e_latency_ms,omitempty"`
	SendDelayMs  Percentiles  `json:"send_delay_ms"`

	// GeneratorSaturated says the generator could not keep its own schedule,
	// so the latencies describe the generator as much as the broker.
	GeneratorSaturated bool   `json:"generator_saturated"`
	SaturationReason   string `json:"saturation_reason,omitempty"`

	SLA         SLA               `json:"sla"`
	Workload    map[string]string `json:"workload,omitempty"`
	Environment Environment       `json:"environment"`
	FindMax     *FindMax          `json:"find_max,omitempty"`
	MergedFrom  []string          `json:"merged_from,omitempty"`
	// Warnings are what `report merge` found suspect in the runs it
	// merged (starts far apart, different workloads).
	Warnings []string `json:"warnings,omitempty"`
	// Profiles lists the broker profiles captured for the measured
	// window (loadgen --profile-broker); see profile.go.
	Profiles *Profiles `json:"profiles,omitempty"`
}

// SLA is the latency target verdict.
type SLA struct {
	TargetP99Ms float64 `json:"target_p99_ms"`
	Pass        bool    `json:"pass"`
}

// Environment describes where the run happened.
type Environment struct {
	Hostname       string `json:"hostname,omitempty"`
	Kernel         string `json:"kernel,omitempty"`
	CPUModel       string `json:"cpu_model,omitempty"`
	Cores          int    `json:"cores,omitempty"`
	GoVersion      string `json:"go_version,omitempty"`
	LoadgenVersion string `json:"loadgen_version,omitempty"`
	LoadgenCommit  string `json:"loadgen_commit,omitempty"`
	Client         string `json:"client,omitempty"`
	// Broker fields come from the broker's admin /healthz when known.
	BrokerVersion string `json:"broker_version,omitempty"`
	BrokerIOPath  string `json:"broker_io_path,omitempty"`
	BrokerFsync   string `json:"broker_fsync,omitempty"`
	BrokerHealthz string `json:"broker_healthz_error,omitempty"`
}

// FindMax is the outcome of a --find-max search.
type FindMax struct {
	MaxPassingRate float64 `json:"max_passing_rate"`
	TargetP99Ms    float64 `json:"target_p99_ms"`
	Steps          []Step  `json:"steps"`
}

// Step is one fixed-rate run of a find-max search.
type Step struct {
	TargetRate   float64 `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	Errors       int64   `json:"errors"`
	Saturated    bool    `json:"generator_saturated"`
	Pass         bool    `json:"pass"`
}

// WriteJSON writes r as indented JSON to dir/result.json.
func WriteJSON(dir string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ResultFile), append(b, '\n'), 0o644)
}

// ReadJSON reads dir/result.json.
func ReadJSON(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ResultFile), err)
	}
	return &r, nil
}
