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
	// Retries counts batches (one partition's records in a produce
	// request) re-sent after a retriable failure, each after a backoff
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
	// Spread is how the measured acknowledged messages fell on the
	// topic's partitions: keyed or sticky (null keys), and how evenly.
	Spread *PartitionSpread `json:"partition_spread,omitempty"`
	// BrokerCPU is the broker processes' CPU time and context switches
	// over the measured window, when the harness knows the brokers: by
	// pid (ringlog bench, loadgen --broker-pid) or by admin address
	// (loadgen --broker-admin, ringlog brokers); see counters.go.
	BrokerCPU *BrokerCPU `json:"broker_cpu,omitempty"`
	// GeneratorCPU is the load generator's own CPU time over the same
	// window (summed over the generators of a merged run).
	GeneratorCPU *GeneratorCPU `json:"generator_cpu,omitempty"`
	// Sweep is a partition sweep (bench --partitions 8,64,...): one row
	// per partition count, each run's full result in its Dir. A sweep
	// result has no histograms of its own.
	Sweep []SweepRow `json:"sweep,omitempty"`
	// Agents is the per-agent breakdown of a distributed run (loadgen
	// --agents): one entry per agent, missing ones included; see agents.go.
	Agents []AgentResult `json:"agents,omitempty"`
	// Incomplete says part of the planned load was not measured (an agent
	// died or never started); IncompleteReason names what is missing.
	Incomplete       bool   `json:"incomplete,omitempty"`
	IncompleteReason string `json:"incomplete_reason,omitempty"`
	// Backlog is the outcome of a consumer backlog-drain workload.
	Backlog *BacklogDrain `json:"backlog_drain,omitempty"`
}

// Partition spread modes.
const (
	SpreadKeyed  = "keyed"
	SpreadSticky = "sticky"
)

// PartitionSpread is the distribution of a run's measured acknowledged
// messages over the topic's partitions.
type PartitionSpread struct {
	Mode            string `json:"mode"` // SpreadKeyed or SpreadSticky (null keys)
	Keys            int    `json:"keys"`
	TopicPartitions int    `json:"topic_partitions"`
	// Written is how many partitions received measured data; MinShare
	// and MaxShare are the smallest and largest fraction of the measured
	// acknowledged messages one partition got (even: 1/TopicPartitions).
	Written  int     `json:"partitions_written"`
	MinShare float64 `json:"min_share"`
	MaxShare float64 `json:"max_share"`
}

// Label is the workload's name in reports: "keyed over N partitions" or
// "sticky (null keys)".
func (p *PartitionSpread) Label() string {
	if p.Mode == SpreadSticky {
		return "sticky (null keys)"
	}
	return fmt.Sprintf("keyed over %d partitions", p.TopicPartitions)
}

// Detail says how evenly the data fell.
func (p *PartitionSpread) Detail() string {
	keys := fmt.Sprintf("%d keys", p.Keys)
	if p.Mode == SpreadSticky {
		keys = "null keys, one partition at a time"
	}
	return fmt.Sprintf("%s; %d of %d partitions received data, share per partition min %.2f%% max %.2f%% (even %.2f%%)",
		keys, p.Written, p.TopicPartitions, 100*p.MinShare, 100*p.MaxShare, 100/float64(max(p.TopicPartitions, 1)))
}

// BrokerCPU is the CPU time (user + system, all threads including the
// kernel's io_uring workers) and the context switches of the broker
// processes during the measured window, summed over the brokers, with
// each broker's own numbers in Brokers (counters.go).
type BrokerCPU struct {
	Processes int     `json:"processes"`
	WindowS   float64 `json:"window_s"`
	Seconds   float64 `json:"cpu_s"`
	// PerGB is Seconds per 10^9 bytes of payload acknowledged in the
	// window (message values; replication and framing not counted).
	PerGB float64 `json:"cpu_s_per_gb"`
	// MessagesAcked is what the per-message numbers divide by: the
	// messages acknowledged in the window.
	MessagesAcked int64 `json:"messages_acked,omitempty"`
	// CPUMicrosPerMsg is Seconds in microseconds per message acknowledged.
	CPUMicrosPerMsg float64 `json:"cpu_us_per_msg,omitempty"`
	// CtxSwitches sums the brokers' context switches.
	CtxSwitches *CtxSwitches `json:"ctx_switches,omitempty"`
	// SameHost says the brokers run on the machine whose cores the
	// generator's CPU (GeneratorCPU) was measured on: brokers known by
	// pid, or by an admin address whose kernel boot id is this one's.
	SameHost bool            `json:"same_host,omitempty"`
	Brokers  []BrokerProcess `json:"brokers,omitempty"`
}

// SweepRow is one partition count of a sweep.
type SweepRow struct {
	Partitions   int              `json:"partitions"`
	Dir          string           `json:"dir"` // the run's result directory, relative to the sweep's
	TargetRate   float64          `json:"target_rate"`
	AchievedRate float64          `json:"achieved_rate"`
	AckLatencyMs Percentiles      `json:"ack_latency_ms"`
	Errors       int64            `json:"errors"`
	Spread       *PartitionSpread `json:"partition_spread,omitempty"`
	BrokerCPU    *BrokerCPU       `json:"broker_cpu,omitempty"`
	GeneratorCPU *GeneratorCPU    `json:"generator_cpu,omitempty"`
	Saturated    bool             `json:"generator_saturated"`
	Pass         bool             `json:"pass"`
}

// SweepRowOf is the row of the run r, stored in dir.
func SweepRowOf(r *Result, partitions int, dir string) SweepRow {
	return SweepRow{Partitions: partitions, Dir: dir, TargetRate: r.TargetRate, AchievedRate: r.AchievedRate,
		AckLatencyMs: r.AckLatencyMs, Errors: r.Errors, Spread: r.Spread, BrokerCPU: r.BrokerCPU, GeneratorCPU: r.GeneratorCPU,
		Saturated: r.GeneratorSaturated, Pass: r.SLA.Pass}
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
	BrokerCommit  string `json:"broker_commit,omitempty"`
	// BrokerMaxProcs is the broker's GOMAXPROCS, BrokerCPUs the CPUs it
	// may run on (0: not reported): brokers that share one machine split
	// its cores (ringlog bench --broker-max-procs).
	BrokerMaxProcs int `json:"broker_max_procs,omitempty"`
	BrokerCPUs     int `json:"broker_cpus,omitempty"`
	// BrokerSchedPolicy is the Linux scheduling policy of the broker's
	// threads (serve --sched-policy; "" when not reported).
	BrokerSchedPolicy string `json:"broker_sched_policy,omitempty"`
	// What the run was measured against (filled by the generator from its
	// flags and the topic's metadata/configs).
	ReplicationFactor int    `json:"replication_factor,omitempty"`
	MinISR            int    `json:"min_insync_replicas,omitempty"`
	Partitions        int    `json:"partitions,omitempty"`
	Acks              string `json:"acks,omitempty"`
	Compression       string `json:"compression,omitempty"`
	// ClientHosts and ClientCPUs are the load-generating hosts and their
	// total CPUs: 1 and Cores for a local run, summed over agents otherwise.
	ClientHosts int `json:"client_hosts,omitempty"`
	ClientCPUs  int `json:"client_cpus,omitempty"`
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
	// CPUPerGB is the brokers' CPU-s per GB acknowledged; CPUMicrosPerMsg
	// and CtxSwitchesPerMsg their CPU-µs and context switches per message
	// acknowledged (brokers known: bench, --broker-pid, --broker-admin).
	CPUPerGB          float64 `json:"broker_cpu_s_per_gb,omitempty"`
	CPUMicrosPerMsg   float64 `json:"broker_cpu_us_per_msg,omitempty"`
	CtxSwitchesPerMsg float64 `json:"broker_ctx_switches_per_msg,omitempty"`
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
