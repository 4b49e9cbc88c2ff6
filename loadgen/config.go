package loadgen

import (
	"fmt"
	"strconv"
	"time"
)

// Config is one load-generation workload. DefaultConfig fills every field.
type Config struct {
	// Bootstrap lists host:port seeds of any Kafka-compatible cluster.
	Bootstrap         []string
	Topic             string
	Partitions        int32
	ReplicationFactor int16
	// clusterBrokers is set by Run from the cluster's metadata (recorded
	// in the workload as cluster_brokers).
	clusterBrokers int
	// minISR is set by Run from the topic's configs (0: unknown).
	minISR int
	// BrokerPIDs are broker processes on this machine (any broker, ringlog
	// or not; Bench sets its own) and CounterAdmins the admin addresses of
	// ringlog brokers anywhere: Run reads their CPU time and context
	// switches at the start and the end of the measured window
	// (counters.go). A distributed run reads them on the controller, not
	// on the agents.
	BrokerPIDs    []int
	CounterAdmins []string
	// TopicConfigs are set on the topic when the run creates it (for
	// example min.insync.replicas=2 for acks=all runs on RF=3).
	TopicConfigs map[string]string
	// Rate is the open-loop target in messages per second (all producers).
	Rate        float64
	MessageSize int
	// Keys > 0 gives messages one of Keys keys (cycling, or random with
	// RandomKeys), spread evenly over the partitions (keyTable); KeysAuto
	// (the default) is keysPerPartition per partition of the topic; 0
	// sends null keys with sticky partitioning.
	Keys       int
	RandomKeys bool
	Producers  int
	// Acks is -1 (all), 1 or 0.
	Acks        int16
	Compression Codec
	Linger      time.Duration
	BatchBytes  int
	// Duration is the measured window; Warmup runs before it and is excluded.
	Duration time.Duration
	Warmup   time.Duration
	// Consumers measure end-to-end latency. With ConsumerGroups 0 they
	// split the partitions between them by assignment (no group
	// coordinator involved); with ConsumerGroups > 0 there are that many
	// consumer groups (OMB's subscriptions), each of Consumers members,
	// every group reading the whole topic.
	Consumers      int
	ConsumerGroups int
	// BacklogBytes > 0 makes a backlog-drain run (backlog.go): the
	// consumers start only once this much is produced and unread (summed
	// over the groups, as OMB counts it), then the catch-up is measured
	// while the producers continue. BacklogDrainRatio is the fraction of
	// the backlog that must be read for it to count as drained (OMB's
	// backlogDrainRatio; 0 means 1).
	BacklogBytes      int64
	BacklogDrainRatio float64
	// Payload, when set, is the value of every message (repeated or cut
	// to MessageSize), like OMB's payloadFile; its first 16 bytes are
	// replaced by the run id and send time. nil: random printable letters.
	Payload []byte
	// RandomPayloads > 0 draws every value from a pool of that many,
	// each RandomBytesRatio random bytes followed by zeros (OMB's
	// useRandomizedPayloads); 0: random printable letters.
	RandomPayloads   int
	RandomBytesRatio float64
	// WorkloadValues are a workload file's fields as it set them
	// (Workload.Values), recorded in the result's workload map.
	WorkloadValues map[string]string
	TargetP99      time.Duration
	// Client is "lean" (raw produce requests) or "kgo" (franz-go).
	Client string
	// StartAt, when set, is the wall-clock time the schedule starts, so
	// several generator processes start together.
	StartAt     time.Time
	Label       string
	Quiet       bool
	BrokerAdmin string
	// MaxInFlight bounds unacknowledged requests per connection.
	MaxInFlight int
	// MaxBufferedBytes bounds request memory per producer; when it is full
	// the generator blocks and the send delay shows it.
	MaxBufferedBytes int
	// DrainTimeout is how long to wait for outstanding acks after the run.
	DrainTimeout   time.Duration
	RequestTimeout time.Duration
	// DeliveryTimeout bounds retries: a batch that failed retriably
	// (leader moved, connection broke, broker timed out or short of
	// replicas or disk) is re-sent to the current leader until this long
	// after its first message's intended time, then counted as errors
	// (the kgo client: kgo.RecordDeliveryTimeout, from when the record was
	// handed over).
	DeliveryTimeout time.Duration
	// RetryBackoff and RetryBackoffMax are the wait before a batch's
	// first retry and the cap of its doubling (backoff.go); Retries, when
	// > 0, also bounds the re-sends of one batch (0: only DeliveryTimeout
	// does). Both clients use them.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	Retries         int

	// ProfileBrokers are admin addresses of brokers to profile for
	// exactly the measured window (profile.go); the profiles land in the
	// run's result directory.
	ProfileBrokers []string
	// ProfileMutexFraction and ProfileBlockRate turn the brokers' mutex
	// and block profiling on for the window only (0: leave them as the
	// broker has them).
	ProfileMutexFraction int
	ProfileBlockRate     time.Duration
	// Perf also runs `perf record -g` at PerfFreq Hz on each profiled
	// broker's process for the window, when perf works on this machine.
	Perf     bool
	PerfFreq int
	// PerfBinary is the perf executable (a name is looked up in PATH).
	PerfBinary string

	// Security is TLS and SASL for every connection to the cluster.
	Security Security

	// onInterval, when set (a load agent), gets every interval the run
	// cuts, as it is cut, to stream to the controller (agent.go).
	onInterval func(intervalReport)
}

// DefaultConfig returns the defaults the CLI shows.
func DefaultConfig() Config {
	return Config{
		Bootstrap:         []string{"127.0.0.1:9092"},
		Topic:             "ringlog-loadgen",
		Partitions:        8,
		ReplicationFactor: -1, // the cluster's default.replication.factor
		Rate:              10_000,
		MessageSize:       1000,
		Producers:         1,
		Keys:              KeysAuto,
		Acks:              -1,
		Linger:            time.Millisecond,
		BatchBytes:        256 << 10,
		Duration:          30 * time.Second,
		Warmup:            5 * time.Second,
		TargetP99:         10 * time.Millisecond,
		Client:            "lean",
		MaxInFlight:       32,
		MaxBufferedBytes:  256 << 20,
		DrainTimeout:      15 * time.Second,
		RequestTimeout:    30 * time.Second,
		DeliveryTimeout:   30 * time.Second,
		RetryBackoff:      100 * time.Millisecond,
		RetryBackoffMax:   time.Second,

		ProfileMutexFraction: 10,
		ProfileBlockRate:     100 * time.Microsecond,
		PerfFreq:             199,
		PerfBinary:           "perf",
	}
}

// valueHeaderLen is the run id and intended wall time carried at the start
// of every value so consumers can compute end-to-end latency.
const valueHeaderLen = 16

// Validate checks fields, and fields against each other.
func (c *Config) Validate() error {
	switch {
	case len(c.Bootstrap) == 0:
		return fmt.Errorf("bootstrap: need at least one broker address")
	case c.Topic == "":
		return fmt.Errorf("topic: empty")
	case c.Partitions < 1:
		return fmt.Errorf("partitions %d: need >= 1", c.Partitions)
	case c.ReplicationFactor < 1 && c.ReplicationFactor != -1:
		return fmt.Errorf("replication-factor %d: need >= 1, or -1 for the cluster's default", c.ReplicationFactor)
	case c.Rate <= 0:
		return fmt.Errorf("rate %v: need > 0", c.Rate)
	case c.MessageSize < valueHeaderLen:
		return fmt.Errorf("message-size %d: need >= %d (run id and send time)", c.MessageSize, valueHeaderLen)
	case c.Keys < 0 && c.Keys != KeysAuto:
		return fmt.Errorf("keys %d: need >= 0, or auto", c.Keys)
	case c.Producers < 1:
		return fmt.Errorf("producers %d: need >= 1", c.Producers)
	case c.Acks != -1 && c.Acks != 0 && c.Acks != 1:
		return fmt.Errorf("acks %d: need all (-1), 1 or 0", c.Acks)
	case c.BatchBytes < 1024:
		return fmt.Errorf("batch-bytes %d: need >= 1024", c.BatchBytes)
	case c.BatchBytes < c.MessageSize+256:
		return fmt.Errorf("batch-bytes %d must exceed message-size %d plus framing", c.BatchBytes, c.MessageSize)
	case c.MaxBufferedBytes < 2*c.BatchBytes:
		return fmt.Errorf("max buffered bytes %d must be at least twice batch-bytes %d", c.MaxBufferedBytes, c.BatchBytes)
	case c.Duration <= 0:
		return fmt.Errorf("duration %v: need > 0", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("warmup %v: need >= 0", c.Warmup)
	case c.Consumers < 0:
		return fmt.Errorf("consumers %d: need >= 0", c.Consumers)
	case c.ConsumerGroups < 0:
		return fmt.Errorf("consumer-groups %d: need >= 0", c.ConsumerGroups)
	case c.ConsumerGroups > 0 && c.Consumers == 0:
		return fmt.Errorf("consumer-groups %d: needs --consumers >= 1 (consumers per group)", c.ConsumerGroups)
	case c.RandomPayloads < 0 || c.RandomBytesRatio < 0 || c.RandomBytesRatio > 1:
		return fmt.Errorf("random payloads %d with ratio %v: need a pool >= 0 and a ratio 0..1", c.RandomPayloads, c.RandomBytesRatio)
	case c.BacklogBytes < 0:
		return fmt.Errorf("backlog-bytes %d: need >= 0", c.BacklogBytes)
	case c.BacklogBytes > 0 && c.Consumers == 0:
		return fmt.Errorf("backlog-bytes: a backlog drains into consumers; needs --consumers >= 1")
	case c.BacklogDrainRatio < 0 || c.BacklogDrainRatio > 1:
		return fmt.Errorf("backlog-drain-ratio %v: need 0 < ratio <= 1", c.BacklogDrainRatio)
	case c.TargetP99 <= 0:
		return fmt.Errorf("target-p99 %v: need > 0", c.TargetP99)
	case c.Client != "lean" && c.Client != "kgo":
		return fmt.Errorf("client %q: need lean or kgo", c.Client)
	case c.RetryBackoff <= 0:
		return fmt.Errorf("retry-backoff %v: need > 0", c.RetryBackoff)
	case c.RetryBackoffMax < c.RetryBackoff:
		return fmt.Errorf("retry-backoff-max %v must be at least retry-backoff %v", c.RetryBackoffMax, c.RetryBackoff)
	case c.Retries < 0:
		return fmt.Errorf("retries %d: need >= 0 (0: bounded by delivery-timeout only)", c.Retries)
	case c.MaxInFlight < 1:
		return fmt.Errorf("max in flight %d: need >= 1", c.MaxInFlight)
	case c.Perf && len(c.ProfileBrokers) == 0:
		return fmt.Errorf("perf: needs --profile-broker (perf records the profiled brokers' processes)")
	case c.Perf && (c.PerfFreq < 1 || c.PerfFreq > 10000):
		return fmt.Errorf("perf-freq %d: need 1..10000", c.PerfFreq)
	case c.ProfileMutexFraction < 0 || c.ProfileBlockRate < 0:
		return fmt.Errorf("profile-mutex-fraction and profile-block-rate: need >= 0")
	}
	for _, pid := range c.BrokerPIDs {
		if pid <= 0 {
			return fmt.Errorf("broker-pid %d: need a process id > 0", pid)
		}
	}
	return c.Security.Validate()
}

// acksName is ParseAcks in reverse: all, 1 or 0.
func acksName(acks int16) string {
	if acks == -1 {
		return "all"
	}
	return strconv.Itoa(int(acks))
}

// ParseAcks maps all|-1|1|0.
func ParseAcks(s string) (int16, error) {
	switch s {
	case "all", "-1":
		return -1, nil
	case "1":
		return 1, nil
	case "0":
		return 0, nil
	}
	return 0, fmt.Errorf("acks %q: need all, 1 or 0", s)
}
