package loadgen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ringlog/ringlog/loadgen/nullsink"
	"github.com/ringlog/ringlog/results"
)

// envVar names the environment variable of a flag: --target-p99 reads
// RINGLOG_TARGET_P99.
func envVar(flag string) []string {
	return []string{"RINGLOG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

func workloadFlags(d Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "bootstrap", Value: strings.Join(d.Bootstrap, ","), Usage: "comma-separated host:port of any Kafka-compatible cluster", EnvVars: envVar("bootstrap")},
		&cli.StringFlag{Name: "topic", Value: d.Topic, EnvVars: envVar("topic")},
		&cli.IntFlag{Name: "partitions", Value: int(d.Partitions), Usage: "partitions when the topic is created", EnvVars: envVar("partitions")},
		&cli.IntFlag{Name: "replication-factor", Value: int(d.ReplicationFactor), Usage: "replication factor when the topic is created", EnvVars: envVar("replication-factor")},
		&cli.StringSliceFlag{Name: "topic-config", Usage: "key=value topic config when the topic is created (repeatable), e.g. min.insync.replicas=2", EnvVars: envVar("topic-config")},
		&cli.Float64Flag{Name: "rate", Value: d.Rate, Usage: "messages per second, open loop (fixed schedule)", EnvVars: envVar("rate")},
		&cli.IntFlag{Name: "message-size", Value: d.MessageSize, Usage: "value bytes per message (>= 16)", EnvVars: envVar("message-size")},
		&cli.IntFlag{Name: "keys", Value: d.Keys, Usage: "number of distinct keys (0: null keys, sticky partitions)", EnvVars: envVar("keys")},
		&cli.BoolFlag{Name: "random-keys", Usage: "pick keys at random instead of cycling", EnvVars: envVar("random-keys")},
		&cli.IntFlag{Name: "producers", Value: d.Producers, Usage: "producer goroutines, each with its own connections", EnvVars: envVar("producers")},
		&cli.StringFlag{Name: "acks", Value: "all", Usage: "all|1|0", EnvVars: envVar("acks")},
		&cli.StringFlag{Name: "compression", Value: "none", Usage: "none|gzip|snappy|lz4|zstd", EnvVars: envVar("compression")},
		&cli.DurationFlag{Name: "linger", Value: d.Linger, Usage: "how long a batch may wait to fill", EnvVars: envVar("linger")},
		&cli.IntFlag{Name: "batch-bytes", Value: d.BatchBytes, Usage: "flush a batch at this size", EnvVars: envVar("batch-bytes")},
		&cli.DurationFlag{Name: "duration", Value: d.Duration, Usage: "measured time (after warmup)", EnvVars: envVar("duration")},
		&cli.DurationFlag{Name: "warmup", Value: d.Warmup, Usage: "time run before measuring, excluded from results", EnvVars: envVar("warmup")},
		&cli.IntFlag{Name: "consumers", Value: d.Consumers, Usage: "consumers measuring end-to-end latency", EnvVars: envVar("consumers")},
		&cli.DurationFlag{Name: "target-p99", Value: d.TargetP99, Usage: "ack-latency p99 target (SLA verdict, find-max)", EnvVars: envVar("target-p99")},
		&cli.StringFlag{Name: "client", Value: d.Client, Usage: "lean (raw produce requests) or kgo (franz-go), for comparison", EnvVars: envVar("client")},
		&cli.IntFlag{Name: "max-in-flight", Value: d.MaxInFlight, Usage: "unacknowledged requests per connection", EnvVars: envVar("max-in-flight")},
		&cli.IntFlag{Name: "max-buffered-bytes", Value: d.MaxBufferedBytes, Usage: "request memory per producer before the generator blocks", EnvVars: envVar("max-buffered-bytes")},
		&cli.DurationFlag{Name: "drain-timeout", Value: d.DrainTimeout, Usage: "wait this long for outstanding acks after the run", EnvVars: envVar("drain-timeout")},
		&cli.DurationFlag{Name: "delivery-timeout", Value: d.DeliveryTimeout, Usage: "retry a batch that failed retriably (leader moved, connection lost, broker error) until this long after its intended time; then its messages count as errors", EnvVars: envVar("delivery-timeout")},
		&cli.DurationFlag{Name: "retry-backoff", Value: d.RetryBackoff, Usage: "wait before a failed batch's first retry; doubles per retry, minus up to 20% jitter", EnvVars: envVar("retry-backoff")},
		&cli.DurationFlag{Name: "retry-backoff-max", Value: d.RetryBackoffMax, Usage: "cap of the retry backoff", EnvVars: envVar("retry-backoff-max")},
		&cli.IntFlag{Name: "retries", Value: d.Retries, Usage: "re-sends of one batch before its messages count as errors (0: only --delivery-timeout bounds them)", EnvVars: envVar("retries")},
		&cli.StringFlag{Name: "out", Usage: "write result.json, .hgrm, .hlog and report.html here", EnvVars: envVar("out")},
		&cli.StringFlag{Name: "label", Usage: "name of this run in reports", EnvVars: envVar("label")},
		&cli.BoolFlag{Name: "quiet", Usage: "no per-second progress lines", EnvVars: envVar("quiet")},
		&cli.StringFlag{Name: "broker-admin", Usage: "broker admin address; its /healthz fills the report's environment", EnvVars: envVar("broker-admin")},
	}
}

func configFrom(c *cli.Context) (Config, error) {
	cfg, err := configFromLookup(c)
	if err != nil {
		return cfg, err
	}
	cfg.Bootstrap = strings.Split(c.String("bootstrap"), ",")
	cfg.BrokerAdmin = c.String("broker-admin")
	cfg.Security = securityFrom(c)
	return cfg, cfg.Validate()
}

// configFromLookup reads the workload flags other than the cluster address.
func configFromLookup(c *cli.Context) (Config, error) {
	cfg := DefaultConfig()
	cfg.Topic = c.String("topic")
	cfg.Partitions = int32(c.Int("partitions"))
	cfg.ReplicationFactor = int16(c.Int("replication-factor"))
	for _, kv := range c.StringSlice("topic-config") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("--topic-config %q: want key=value", kv)
		}
		if cfg.TopicConfigs == nil {
			cfg.TopicConfigs = map[string]string{}
		}
		cfg.TopicConfigs[k] = v
	}
	cfg.Rate = c.Float64("rate")
	cfg.MessageSize = c.Int("message-size")
	cfg.Keys = c.Int("keys")
	cfg.RandomKeys = c.Bool("random-keys")
	cfg.Producers = c.Int("producers")
	var err error
	if cfg.Acks, err = ParseAcks(c.String("acks")); err != nil {
		return cfg, err
	}
	if cfg.Compression, err = ParseCodec(c.String("compression")); err != nil {
		return cfg, err
	}
	cfg.Linger = c.Duration("linger")
	cfg.BatchBytes = c.Int("batch-bytes")
	cfg.Duration = c.Duration("duration")
	cfg.Warmup = c.Duration("warmup")
	cfg.Consumers = c.Int("consumers")
	cfg.TargetP99 = c.Duration("target-p99")
	cfg.Client = c.String("client")
	cfg.MaxInFlight = c.Int("max-in-flight")
	cfg.MaxBufferedBytes = c.Int("max-buffered-bytes")
	cfg.DrainTimeout = c.Duration("drain-timeout")
	cfg.DeliveryTimeout = c.Duration("delivery-timeout")
	cfg.RetryBackoff = c.Duration("retry-backoff")
	cfg.RetryBackoffMax = c.Duration("retry-backoff-max")
	cfg.Retries = c.Int("retries")
	cfg.Label = c.String("label")
	cfg.Quiet = c.Bool("quiet")
	return cfg, nil
}

// Commands returns the loadgen, bench and size commands for cmd/ringlog.
func Commands() []*cli.Command {
	d := DefaultConfig()
	lgFlags := append(workloadFlags(d),
		&cli.TimestampFlag{Name: "start-at", Layout: time.RFC3339Nano, Usage: "wall-clock start (RFC 3339) so several generators start together", EnvVars: envVar("start-at")},
		&cli.BoolFlag{Name: "find-max", Usage: "step the rate up and bisect to the highest rate meeting --target-p99 without errors", EnvVars: envVar("find-max")},
		&cli.IntFlag{Name: "find-max-steps", Value: 12, Usage: "most steps a find-max search runs", EnvVars: envVar("find-max-steps")},
		&cli.Float64Flag{Name: "find-max-precision", Value: 0.05, Usage: "stop bisecting when the bracket is this fraction of the rate", EnvVars: envVar("find-max-precision")},
		&cli.IntFlag{Name: "find-max-retries", Value: 1, Usage: "re-run a failing rate this many times before it counts as failed (noise guard)", EnvVars: envVar("find-max-retries")},
		&cli.BoolFlag{Name: "null-sink", Usage: "ignore --bootstrap and produce into an in-process sink that discards data (measures the generator)", EnvVars: envVar("null-sink")},
		&cli.StringFlag{Name: "null-sink-error", Usage: "with --null-sink: answer every produce with this Kafka error (name such as KAFKA_STORAGE_ERROR, or code), to measure the generator's retries", EnvVars: envVar("null-sink-error")},
		&cli.StringSliceFlag{Name: "profile-broker", Usage: "broker admin address (http://host:port or host:port; repeatable): capture its CPU, heap, mutex and block profiles for exactly the measured window into --out", EnvVars: envVar("profile-broker")},
		&cli.IntFlag{Name: "profile-mutex-fraction", Value: d.ProfileMutexFraction, Usage: "mutex profiling during the window: sample 1/N contention events (0: the broker's own setting)", EnvVars: envVar("profile-mutex-fraction")},
		&cli.DurationFlag{Name: "profile-block-rate", Value: d.ProfileBlockRate, Usage: "block profiling during the window: one sample per this much time blocked (0: the broker's own setting)", EnvVars: envVar("profile-block-rate")},
		&cli.BoolFlag{Name: "perf", Usage: "also run `perf record -g` on each --profile-broker process for the window (local brokers; says why when perf cannot run) and write folded stacks and a flame graph", EnvVars: envVar("perf")},
		&cli.IntFlag{Name: "perf-freq", Value: d.PerfFreq, Usage: "perf sampling frequency, Hz", EnvVars: envVar("perf-freq")},
		&cli.StringFlag{Name: "perf-binary", Value: d.PerfBinary, Usage: "perf executable", EnvVars: envVar("perf-binary")},
	)
	lgFlags = append(lgFlags, securityFlags()...)
	return []*cli.Command{
		{
			Name:  "loadgen",
			Usage: "produce a fixed-rate workload and report latency without coordinated omission",
			Description: "Connects to any Kafka-compatible cluster; --tls*/--sasl-* reach secured listeners (set the\n" +
				"password with RINGLOG_SASL_PASSWORD). Over TLS a ringlog broker copies fetch data through user\n" +
				"space (no sendfile) and both sides encrypt, so TLS numbers are not comparable to plaintext ones.",
			Flags:  lgFlags,
			Action: loadgenAction,
		},
		benchCommand(),
		sizeCommand(),
	}
}

// ErrInterrupted is what loadgen and bench return after writing the
// partial result of a run stopped by SIGINT or SIGTERM.
var ErrInterrupted = errors.New("interrupted: the result covers the time measured before the signal")

// signalContext ends on SIGINT or SIGTERM (or when parent ends: tests).
// After the first signal the handler is removed, so a second one kills
// the process instead of waiting for the bounded drain.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

func loadgenAction(c *cli.Context) error {
	cfg, err := configFrom(c)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if ts := c.Timestamp("start-at"); ts != nil {
		cfg.StartAt = *ts
	}
	cfg.ProfileBrokers = c.StringSlice("profile-broker")
	cfg.ProfileMutexFraction = c.Int("profile-mutex-fraction")
	cfg.ProfileBlockRate = c.Duration("profile-block-rate")
	cfg.Perf = c.Bool("perf")
	cfg.PerfFreq = c.Int("perf-freq")
	cfg.PerfBinary = c.String("perf-binary")
	if err := cfg.Validate(); err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if len(cfg.ProfileBrokers) > 0 && c.String("out") == "" {
		return cli.Exit("--profile-broker needs --out: the profiles are written next to the report", 2)
	}
	if len(cfg.ProfileBrokers) > 0 && c.Bool("find-max") {
		return cli.Exit("--profile-broker profiles one measured window; it does not combine with --find-max", 2)
	}
	for _, w := range cfg.Security.Warnings() {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w)
	}
	if c.Bool("null-sink") {
		if cfg.Security != (Security{}) {
			return cli.Exit("--null-sink is an in-process plaintext sink: it takes no --tls-* or --sasl-* options", 2)
		}
		code, err := kafkaErrorCode(c.String("null-sink-error"))
		if err != nil {
			return cli.Exit(fmt.Sprintf("--null-sink-error: %v", err), 2)
		}
		sink, err := nullsink.Listen("127.0.0.1:0", cfg.Partitions)
		if err != nil {
			return err
		}
		defer sink.Close()
		sink.FailProduce(code)
		cfg.Bootstrap = []string{sink.Addr()}
	} else if c.String("null-sink-error") != "" {
		return cli.Exit("--null-sink-error needs --null-sink", 2)
	}
	ctx, cancel := signalContext(c.Context)
	defer cancel()
	out := c.App.Writer
	var run *results.Run
	if c.Bool("find-max") {
		run, err = findMaxRun(ctx, cfg, FindMaxConfig{
			StartRate: cfg.Rate, TargetP99: float64(cfg.TargetP99) / 1e6,
			Precision: c.Float64("find-max-precision"), MaxSteps: c.Int("find-max-steps"), Retries: c.Int("find-max-retries"),
		}, out)
		if run != nil && err != nil && ctx.Err() != nil {
			run.Result.Interrupted, err = true, nil // keep what the search found
		}
	} else {
		run, err = Run(ctx, cfg, out)
	}
	if err != nil {
		return err
	}
	return finish(run, cfg, c.String("out"), out)
}

// findMaxRun searches, keeping the full run of the highest passing step (or
// the last step when none passed) as the main result.
func findMaxRun(ctx context.Context, cfg Config, fc FindMaxConfig, out interface{ Write([]byte) (int, error) }) (*results.Run, error) {
	var best, last *results.Run
	fm, err := FindMax(ctx, fc,
		func(ctx context.Context, rate float64) (results.Step, error) {
			step := cfg
			step.Rate = rate
			fmt.Fprintf(out, "find-max: step at %.0f msg/s\n", rate)
			r, err := Run(ctx, step, out)
			if err != nil {
				return results.Step{}, err
			}
			last = r
			res := r.Result
			if res.Interrupted {
				// A partial step neither passes nor fails a rate.
				return results.Step{}, ctx.Err()
			}
			s := results.Step{AchievedRate: res.AchievedRate, P50Ms: res.AckLatencyMs.P50, P99Ms: res.AckLatencyMs.P99,
				MaxMs: res.AckLatencyMs.Max, Errors: res.Errors, Saturated: res.GeneratorSaturated}
			if res.SLA.Pass && !res.GeneratorSaturated && (best == nil || rate > best.Result.TargetRate) {
				best = r
			}
			return s, ctx.Err()
		})
	if last == nil {
		return nil, err
	}
	if best == nil {
		best = last
	}
	best.Result.FindMax = fm
	return best, err
}

// finish adds the environment, writes the report directory and prints the
// summary; for an interrupted run it then returns ErrInterrupted.
func finish(run *results.Run, cfg Config, dir string, out interface{ Write([]byte) (int, error) }) error {
	run.Result.Environment = Environment(cfg.BrokerAdmin, cfg.Client)
	if dir != "" {
		if err := run.Write(dir); err != nil {
			return err
		}
	}
	results.WriteSummary(out, &run.Result)
	if run.Result.Profiles != nil {
		results.WriteProfiles(out, dir, &run.Result, run.Files, 10)
	}
	if dir != "" {
		fmt.Fprintf(out, "report: %s\n", dir)
	}
	if run.Result.Interrupted {
		return ErrInterrupted
	}
	return nil
}

func sizeCommand() *cli.Command {
	return &cli.Command{
		Name:  "size",
		Usage: "capacity arithmetic for a workload (optionally brokers needed, from a find-max result)",
		Flags: []cli.Flag{
			&cli.Float64Flag{Name: "peak-rate", Value: 5_000_000, Usage: "peak messages per second", EnvVars: envVar("peak-rate")},
			&cli.Float64Flag{Name: "avg-rate", Value: 500_000, Usage: "average messages per second", EnvVars: envVar("avg-rate")},
			&cli.Float64Flag{Name: "message-bytes", Value: 1000, EnvVars: envVar("message-bytes")},
			&cli.Float64Flag{Name: "retention-days", Value: 7, EnvVars: envVar("retention-days")},
			&cli.Float64Flag{Name: "copies", Value: 3, Usage: "replication factor", EnvVars: envVar("copies")},
			&cli.StringFlag{Name: "from", Usage: "result directory of a --find-max run", EnvVars: envVar("from")},
			&cli.IntFlag{Name: "measured-brokers", Usage: "brokers in the --from run's cluster (default: the count the run recorded from the cluster's metadata)", EnvVars: envVar("measured-brokers")},
			&cli.Float64Flag{Name: "disk-per-broker", Usage: "usable disk per broker in TB (decimal) to weigh retention against; 0: not considered", EnvVars: envVar("disk-per-broker")},
			&cli.Float64Flag{Name: "nic-gbps", Usage: "network per broker in Gbit/s, each direction; 0: not considered", EnvVars: envVar("nic-gbps")},
			&cli.Float64Flag{Name: "consumer-groups", Value: 1, Usage: "consumer groups reading the whole stream (network egress)", EnvVars: envVar("consumer-groups")},
		},
		Action: func(c *cli.Context) error {
			in := SizeInput{PeakRate: c.Float64("peak-rate"), AvgRate: c.Float64("avg-rate"), MessageBytes: c.Float64("message-bytes"),
				RetentionDays: c.Float64("retention-days"), Copies: c.Float64("copies")}
			if in.Copies < 1 || in.MessageBytes <= 0 || in.PeakRate < 0 || in.AvgRate < 0 || in.RetentionDays < 0 {
				return cli.Exit("size: copies >= 1, message-bytes > 0 and non-negative rates and days", 2)
			}
			capacity := Size(in)
			var r *results.Result
			if dir := c.String("from"); dir != "" {
				var err error
				if r, err = results.ReadJSON(dir); err != nil {
					return err
				}
				res := Resources{DiskBytes: c.Float64("disk-per-broker") * 1e12, NICBitsPerSec: c.Float64("nic-gbps") * 1e9, ConsumerGroups: c.Float64("consumer-groups")}
				if err := capacity.WithMeasurement(r, c.Int("measured-brokers"), res); err != nil {
					return fmt.Errorf("%s: %w", dir, err)
				}
			}
			WriteSize(c.App.Writer, in, capacity, r)
			return nil
		},
	}
}
