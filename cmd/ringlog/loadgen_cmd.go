package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/loadgen"
	"github.com/ringlog/ringlog/results"
	"github.com/urfave/cli/v2"
)

// The client-side commands `loadgen`, `bench` and `size`: flags here, the
// work in package loadgen. Every flag also reads RINGLOG_<FLAG>.

func workloadFlags(d loadgen.Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "bootstrap", Value: strings.Join(d.Bootstrap, ","), Usage: "comma-separated host:port of any Kafka-compatible cluster", EnvVars: env("bootstrap")},
		&cli.StringFlag{Name: "topic", Value: d.Topic, EnvVars: env("topic")},
		&cli.StringFlag{Name: "partitions", Value: strconv.Itoa(int(d.Partitions)), Usage: "partitions when the topic is created; a comma list (8,64,256,1024) sweeps: one run per count, each on a fresh topic <topic>-p<count>, one table and chart", EnvVars: env("partitions")},
		&cli.IntFlag{Name: "replication-factor", Value: int(d.ReplicationFactor), Usage: "replication factor when the topic is created (-1: the cluster's default.replication.factor; bench: 3, or the broker count if fewer)", EnvVars: env("replication-factor")},
		&cli.StringSliceFlag{Name: "topic-config", Usage: "key=value topic config when the topic is created (repeatable), e.g. min.insync.replicas=2", EnvVars: env("topic-config")},
		&cli.Float64Flag{Name: "rate", Value: d.Rate, Usage: "messages per second, open loop (fixed schedule)", EnvVars: env("rate")},
		&cli.IntFlag{Name: "message-size", Value: d.MessageSize, Usage: "value bytes per message (>= 16)", EnvVars: env("message-size")},
		&cli.StringFlag{Name: "keys", Value: "auto", Usage: "distinct keys, spread evenly over all partitions (auto: 8 per partition of the topic); 0: null keys, the sticky partitioner sends to one partition at a time (reports label it)", EnvVars: env("keys")},
		&cli.BoolFlag{Name: "random-keys", Usage: "pick keys at random instead of cycling", EnvVars: env("random-keys")},
		&cli.IntFlag{Name: "producers", Value: d.Producers, Usage: "producer goroutines, each with its own connections", EnvVars: env("producers")},
		&cli.StringFlag{Name: "acks", Value: "all", Usage: "all|1|0", EnvVars: env("acks")},
		&cli.StringFlag{Name: "compression", Value: "none", Usage: "none|gzip|snappy|lz4|zstd", EnvVars: env("compression")},
		&cli.DurationFlag{Name: "linger", Value: d.Linger, Usage: "how long a batch may wait to fill", EnvVars: env("linger")},
		&cli.IntFlag{Name: "batch-bytes", Value: d.BatchBytes, Usage: "flush a batch at this size", EnvVars: env("batch-bytes")},
		&cli.DurationFlag{Name: "duration", Value: d.Duration, Usage: "measured time (after warmup)", EnvVars: env("duration")},
		&cli.DurationFlag{Name: "warmup", Value: d.Warmup, Usage: "time run before measuring, excluded from results", EnvVars: env("warmup")},
		&cli.IntFlag{Name: "consumers", Value: d.Consumers, Usage: "consumers measuring end-to-end latency (with --consumer-groups: consumers in each group)", EnvVars: env("consumers")},
		&cli.IntFlag{Name: "consumer-groups", Value: d.ConsumerGroups, Usage: "consumer groups, each reading the whole topic with --consumers members (0: the consumers split the partitions by assignment, no group)", EnvVars: env("consumer-groups")},
		&cli.Int64Flag{Name: "backlog-bytes", Value: d.BacklogBytes, Usage: "backlog drain: keep the consumers paused until this many bytes are unread (summed over groups), then resume them while producing and measure the catch-up", EnvVars: env("backlog-bytes")},
		&cli.Float64Flag{Name: "backlog-drain-ratio", Value: 1, Usage: "fraction of the backlog that must be read for it to count as drained", EnvVars: env("backlog-drain-ratio")},
		&cli.StringFlag{Name: "workload", Usage: "OpenMessaging Benchmark workload file (YAML); flags given explicitly (on the command line or as RINGLOG_* variables) override its values", EnvVars: env("workload")},
		&cli.DurationFlag{Name: "target-p99", Value: d.TargetP99, Usage: "ack-latency p99 target (SLA verdict, find-max)", EnvVars: env("target-p99")},
		&cli.StringFlag{Name: "client", Value: d.Client, Usage: "lean (raw produce requests) or kgo (franz-go), for comparison", EnvVars: env("client")},
		&cli.IntFlag{Name: "max-in-flight", Value: d.MaxInFlight, Usage: "unacknowledged requests per connection", EnvVars: env("max-in-flight")},
		&cli.IntFlag{Name: "max-buffered-bytes", Value: d.MaxBufferedBytes, Usage: "request memory per producer before the generator blocks", EnvVars: env("max-buffered-bytes")},
		&cli.DurationFlag{Name: "drain-timeout", Value: d.DrainTimeout, Usage: "wait this long for outstanding acks after the run", EnvVars: env("drain-timeout")},
		&cli.DurationFlag{Name: "delivery-timeout", Value: d.DeliveryTimeout, Usage: "retry a batch that failed retriably (leader moved, connection lost, broker error) until this long after its intended time; then its messages count as errors", EnvVars: env("delivery-timeout")},
		&cli.DurationFlag{Name: "retry-backoff", Value: d.RetryBackoff, Usage: "wait before a failed batch's first retry; doubles per retry, minus up to 20% jitter", EnvVars: env("retry-backoff")},
		&cli.DurationFlag{Name: "retry-backoff-max", Value: d.RetryBackoffMax, Usage: "cap of the retry backoff", EnvVars: env("retry-backoff-max")},
		&cli.IntFlag{Name: "retries", Value: d.Retries, Usage: "re-sends of one batch before its messages count as errors (0: only --delivery-timeout bounds them)", EnvVars: env("retries")},
		&cli.StringFlag{Name: "out", Usage: "write result.json, .hgrm, .hlog and report.html here", EnvVars: env("out")},
		&cli.StringFlag{Name: "label", Usage: "name of this run in reports", EnvVars: env("label")},
		&cli.BoolFlag{Name: "quiet", Usage: "no per-second progress lines", EnvVars: env("quiet")},
		&cli.StringSliceFlag{Name: "broker-admin", Usage: "ringlog broker admin address (repeatable or comma-separated): the first one's /healthz fills the report's environment; every one's CPU time and context switches over the measured window (/v1/process/counters) go into broker_cpu", EnvVars: env("broker-admin")},
	}
}

// workloadFrom reads the workload flags other than the cluster address,
// and the partition counts (more than one: a sweep). With --workload the
// file's values come first and only flags given explicitly override them;
// findMax reports a file's producerRate 0 (run a find-max search).
func workloadFrom(c *cli.Context) (cfg loadgen.Config, sweep []int32, findMax bool, err error) {
	cfg = loadgen.DefaultConfig()
	all := func(string) bool { return true }
	path := c.String("workload")
	if path == "" {
		sweep, err = workloadFlagsInto(c, &cfg, all)
		return cfg, sweep, false, err
	}
	wl, err := loadgen.LoadWorkload(path)
	if err != nil {
		return cfg, nil, false, err
	}
	// The flags' defaults (bench has its own) first, then the file, then
	// the flags given explicitly.
	if _, err = workloadFlagsInto(c, &cfg, all); err != nil {
		return cfg, nil, false, err
	}
	if findMax, err = wl.Apply(&cfg); err != nil {
		return cfg, nil, false, fmt.Errorf("workload %s: %w", path, err)
	}
	sweep = []int32{cfg.Partitions}
	if s, err := workloadFlagsInto(c, &cfg, c.IsSet); err != nil {
		return cfg, nil, false, err
	} else if s != nil {
		sweep = s
	}
	if c.IsSet("rate") {
		findMax = false // a rate given overrides the file's producerRate 0
	}
	return cfg, sweep, findMax, nil
}

// workloadFlagsInto sets the fields of cfg whose flag set says apply, and
// returns the partition counts when --partitions applies.
func workloadFlagsInto(c *cli.Context, cfg *loadgen.Config, set func(name string) bool) (sweep []int32, err error) {
	if set("topic") {
		cfg.Topic = c.String("topic")
	}
	if set("partitions") {
		if sweep, err = loadgen.ParsePartitions(c.String("partitions")); err != nil {
			return nil, err
		}
		cfg.Partitions = sweep[0]
	}
	if set("replication-factor") {
		cfg.ReplicationFactor = int16(c.Int("replication-factor"))
	}
	for _, kv := range c.StringSlice("topic-config") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--topic-config %q: want key=value", kv)
		}
		if cfg.TopicConfigs == nil {
			cfg.TopicConfigs = map[string]string{}
		}
		cfg.TopicConfigs[k] = v
	}
	if set("rate") {
		cfg.Rate = c.Float64("rate")
	}
	if set("message-size") {
		cfg.MessageSize = c.Int("message-size")
	}
	if set("keys") {
		if cfg.Keys, err = loadgen.ParseKeys(c.String("keys")); err != nil {
			return nil, err
		}
	}
	if set("random-keys") {
		cfg.RandomKeys = c.Bool("random-keys")
	}
	if set("producers") {
		cfg.Producers = c.Int("producers")
	}
	if set("acks") {
		if cfg.Acks, err = loadgen.ParseAcks(c.String("acks")); err != nil {
			return nil, err
		}
	}
	if set("compression") {
		if cfg.Compression, err = loadgen.ParseCodec(c.String("compression")); err != nil {
			return nil, err
		}
	}
	ints := map[string]*int{"batch-bytes": &cfg.BatchBytes, "consumers": &cfg.Consumers, "consumer-groups": &cfg.ConsumerGroups,
		"max-in-flight": &cfg.MaxInFlight, "max-buffered-bytes": &cfg.MaxBufferedBytes, "retries": &cfg.Retries}
	for name, p := range ints {
		if set(name) {
			*p = c.Int(name)
		}
	}
	durations := map[string]*time.Duration{"linger": &cfg.Linger, "duration": &cfg.Duration, "warmup": &cfg.Warmup,
		"target-p99": &cfg.TargetP99, "drain-timeout": &cfg.DrainTimeout, "delivery-timeout": &cfg.DeliveryTimeout,
		"retry-backoff": &cfg.RetryBackoff, "retry-backoff-max": &cfg.RetryBackoffMax}
	for name, p := range durations {
		if set(name) {
			*p = c.Duration(name)
		}
	}
	if set("backlog-bytes") {
		cfg.BacklogBytes = c.Int64("backlog-bytes")
	}
	if set("backlog-drain-ratio") {
		cfg.BacklogDrainRatio = c.Float64("backlog-drain-ratio")
	}
	if set("client") {
		cfg.Client = c.String("client")
	}
	if set("label") {
		cfg.Label = c.String("label")
	}
	cfg.Quiet = c.Bool("quiet")
	return sweep, nil
}

// securityFlags are the connection options of commands that reach an
// existing cluster.
func securityFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "tls", Usage: "connect with TLS, trusting the system roots (implied by the other --tls-* options); TLS numbers are not comparable to plaintext ones", EnvVars: env("tls")},
		&cli.StringFlag{Name: "tls-ca", Usage: "PEM CA bundle to trust instead of the system roots", EnvVars: env("tls-ca")},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM client certificate (mutual TLS; with --tls-key)", EnvVars: env("tls-cert")},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert", EnvVars: env("tls-key")},
		&cli.StringFlag{Name: "tls-server-name", Usage: "name to verify in broker certificates (default: the host dialed)", EnvVars: env("tls-server-name")},
		&cli.StringFlag{Name: "sasl-mechanism", Usage: "PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (default SCRAM-SHA-512 when --sasl-user is set)", EnvVars: env("sasl-mechanism")},
		&cli.StringFlag{Name: "sasl-user", Usage: "authenticate every connection as this user", EnvVars: env("sasl-user")},
		&cli.StringFlag{Name: "sasl-password", Usage: "password of --sasl-user (prefer the environment variable: arguments are visible to other users)", EnvVars: env("sasl-password")},
	}
}

func securityFrom(c *cli.Context) loadgen.Security {
	return loadgen.Security{
		TLS:           c.Bool("tls"),
		TLSCA:         c.String("tls-ca"),
		TLSCert:       c.String("tls-cert"),
		TLSKey:        c.String("tls-key"),
		TLSServerName: c.String("tls-server-name"),
		SASLMechanism: c.String("sasl-mechanism"),
		SASLUser:      c.String("sasl-user"),
		SASLPassword:  c.String("sasl-password"),
	}
}

func loadgenCommand() *cli.Command {
	d := loadgen.DefaultOptions()
	flags := append(workloadFlags(d.Config),
		&cli.TimestampFlag{Name: "start-at", Layout: time.RFC3339Nano, Usage: "wall-clock start (RFC 3339) so several generators start together", EnvVars: env("start-at")})
	flags = append(flags, findMaxFlags(d)...)
	flags = append(flags,
		&cli.BoolFlag{Name: "null-sink", Usage: "ignore --bootstrap and produce into an in-process sink that discards data (measures the generator)", EnvVars: env("null-sink")},
		&cli.StringFlag{Name: "null-sink-error", Usage: "with --null-sink: answer every produce with this Kafka error (name such as KAFKA_STORAGE_ERROR, or code), to measure the generator's retries", EnvVars: env("null-sink-error")},
		&cli.IntSliceFlag{Name: "broker-pid", Usage: "a broker process on this machine, any broker (repeatable or comma-separated): its CPU time and context switches over the measured window, from /proc, go into broker_cpu", EnvVars: env("broker-pid")},
		&cli.StringSliceFlag{Name: "profile-broker", Usage: "broker admin address (http://host:port or host:port; repeatable): capture its CPU, heap, mutex and block profiles for exactly the measured window into --out", EnvVars: env("profile-broker")},
		&cli.IntFlag{Name: "profile-mutex-fraction", Value: d.Config.ProfileMutexFraction, Usage: "mutex profiling during the window: sample 1/N contention events (0: the broker's own setting)", EnvVars: env("profile-mutex-fraction")},
		&cli.DurationFlag{Name: "profile-block-rate", Value: d.Config.ProfileBlockRate, Usage: "block profiling during the window: one sample per this much time blocked (0: the broker's own setting)", EnvVars: env("profile-block-rate")},
		&cli.BoolFlag{Name: "perf", Usage: "also run `perf record -g` on each --profile-broker process for the window (local brokers; says why when perf cannot run) and write folded stacks and a flame graph", EnvVars: env("perf")},
		&cli.IntFlag{Name: "perf-freq", Value: d.Config.PerfFreq, Usage: "perf sampling frequency, Hz", EnvVars: env("perf-freq")},
		&cli.StringFlag{Name: "perf-binary", Value: d.Config.PerfBinary, Usage: "perf executable", EnvVars: env("perf-binary")},
	)
	flags = append(flags, securityFlags()...)
	flags = append(flags, agentsFlags()...)
	return &cli.Command{
		Name:  "loadgen",
		Usage: "produce a fixed-rate workload and report latency without coordinated omission",
		Description: "Connects to any Kafka-compatible cluster; --tls*/--sasl-* reach secured listeners (set the\n" +
			"password with RINGLOG_SASL_PASSWORD). Over TLS a ringlog broker copies fetch data through user\n" +
			"space (no sendfile) and both sides encrypt, so TLS numbers are not comparable to plaintext ones.",
		Flags: flags,
		Action: func(c *cli.Context) error {
			o, err := loadgenOptions(c)
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			return usageExit(loadgen.Execute(ctx, o, c.App.Writer, c.App.ErrWriter))
		},
		Subcommands: []*cli.Command{agentCommand()},
	}
}

// agentsFlags run loadgen or bench on load agents (loadgen agent).
func agentsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "agents", Usage: "comma-separated host:port of `ringlog loadgen agent`s: split the rate and producers over them, start them together, merge their results into --out", EnvVars: env("agents")},
		&cli.StringFlag{Name: "agent-token", Usage: "the token the agents were started with (prefer the environment variable)", EnvVars: env("agent-token")},
	}
}

// agentsFrom reads agentsFlags.
func agentsFrom(c *cli.Context) ([]string, string) {
	var agents []string
	for _, a := range strings.Split(c.String("agents"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			agents = append(agents, a)
		}
	}
	return agents, c.String("agent-token")
}

func agentCommand() *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "serve load runs for a `ringlog loadgen --agents` controller (one at a time)",
		Description: "Prints \"agent listening on HOST:PORT\" once bound. Every request must carry the token;\n" +
			"with --allow-from, connections from other addresses are closed. The protocol is in docs/LOAD-AGENTS.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:7070", Usage: "host:port to listen on (port 0: any free port)", EnvVars: env("listen")},
			&cli.StringFlag{Name: "agent-token", Aliases: []string{"token"}, Usage: "shared secret every controller request must carry (required; prefer the environment variable)", EnvVars: env("agent-token")},
			&cli.StringSliceFlag{Name: "allow-from", Usage: "IPs or CIDRs allowed to connect (repeatable or comma-separated; default: any)", EnvVars: env("allow-from")},
		},
		Action: func(c *cli.Context) error {
			a, err := loadgen.ListenAgent(loadgen.AgentConfig{
				Listen: c.String("listen"), Token: c.String("agent-token"),
				AllowFrom: c.StringSlice("allow-from"), Log: c.App.ErrWriter,
			})
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			fmt.Fprintf(c.App.Writer, "agent listening on %s\n", a.Addr())
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			return a.Serve(ctx)
		},
	}
}

// findMaxFlags are the find-max search's flags (loadgen and bench).
func findMaxFlags(d loadgen.Options) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "find-max", Usage: "step the rate up and bisect to the highest rate meeting --target-p99 without errors", EnvVars: env("find-max")},
		&cli.IntFlag{Name: "find-max-steps", Value: d.FindMaxSteps, Usage: "most steps a find-max search runs", EnvVars: env("find-max-steps")},
		&cli.Float64Flag{Name: "find-max-precision", Value: d.FindMaxPrecision, Usage: "stop bisecting when the bracket is this fraction of the rate", EnvVars: env("find-max-precision")},
		&cli.IntFlag{Name: "find-max-retries", Value: d.FindMaxRetries, Usage: "re-run a failing rate this many times before it counts as failed (noise guard)", EnvVars: env("find-max-retries")},
	}
}

// findMaxFrom reads findMaxFlags into o.
func findMaxFrom(c *cli.Context, o *loadgen.Options) {
	o.FindMax = c.Bool("find-max")
	o.FindMaxSteps = c.Int("find-max-steps")
	o.FindMaxPrecision = c.Float64("find-max-precision")
	o.FindMaxRetries = c.Int("find-max-retries")
}

// loadgenOptions reads the loadgen command's flags.
func loadgenOptions(c *cli.Context) (loadgen.Options, error) {
	cfg, sweep, findMax, err := workloadFrom(c)
	if err != nil {
		return loadgen.Options{}, err
	}
	cfg.Bootstrap = strings.Split(c.String("bootstrap"), ",")
	for _, a := range c.StringSlice("broker-admin") {
		if a = strings.TrimSpace(a); a != "" { // RINGLOG_BROKER_ADMIN= is no address
			cfg.CounterAdmins = append(cfg.CounterAdmins, a)
		}
	}
	if len(cfg.CounterAdmins) > 0 {
		cfg.BrokerAdmin = cfg.CounterAdmins[0]
	}
	cfg.BrokerPIDs = c.IntSlice("broker-pid")
	cfg.Security = securityFrom(c)
	if ts := c.Timestamp("start-at"); ts != nil {
		cfg.StartAt = *ts
	}
	cfg.ProfileBrokers = c.StringSlice("profile-broker")
	cfg.ProfileMutexFraction = c.Int("profile-mutex-fraction")
	cfg.ProfileBlockRate = c.Duration("profile-block-rate")
	cfg.Perf = c.Bool("perf")
	cfg.PerfFreq = c.Int("perf-freq")
	cfg.PerfBinary = c.String("perf-binary")
	o := loadgen.Options{
		Config:        cfg,
		Out:           c.String("out"),
		NullSink:      c.Bool("null-sink"),
		NullSinkError: c.String("null-sink-error"),
		Sweep:         sweep,
	}
	findMaxFrom(c, &o)
	o.FindMax = o.FindMax || findMax
	o.Agents, o.AgentToken = agentsFrom(c)
	return o, nil
}

func benchCommand() *cli.Command {
	d := loadgen.DefaultBenchConfig()
	flags := []cli.Flag{
		&cli.IntFlag{Name: "brokers", Value: d.Brokers, Usage: "brokers to start, all controller voters (1: a single node); topics get RF=min(brokers,3) and min.insync.replicas 2 unless --replication-factor is set", EnvVars: env("brokers")},
		&cli.StringFlag{Name: "broker-bin", Usage: "broker binary (default: this ringlog executable); bin/fakebroker (make build) is franz-go's in-memory kfake, the baseline to compare with (use --brokers 1)", EnvVars: env("broker-bin")},
		&cli.StringFlag{Name: "broker-max-procs", Value: "auto", Usage: "GOMAXPROCS of each broker: auto (this machine's cores split among the brokers, at least 1; one broker gets them all) | N | 0 (Go's default: every broker schedules on all cores)", EnvVars: env("broker-max-procs")},
	}
	flags = append(flags, findMaxFlags(loadgen.DefaultOptions())...)
	flags = append(flags, agentsFlags()...)
	for _, f := range workloadFlags(d.Workload) {
		switch f.Names()[0] {
		case "bootstrap", "broker-admin":
			continue // bench starts its own broker
		case "out":
			f = &cli.StringFlag{Name: "out", Usage: "report directory (default ./bench-results/<timestamp>)", EnvVars: env("out")}
		}
		flags = append(flags, f)
	}
	return &cli.Command{
		Name:  "bench",
		Usage: "start a local ringlog on loopback, run a default workload, print the report and the p99 verdict",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if !serveSupported && c.String("broker-bin") == "" {
				return errServeUnsupported
			}
			// Installed before the brokers start, so Ctrl-C while they
			// start still stops them instead of killing only us.
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			cfg, sweep, findMax, err := workloadFrom(c)
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			var search loadgen.Options
			findMaxFrom(c, &search)
			search.FindMax = search.FindMax || findMax
			agents, token := agentsFrom(c)
			procs := -1
			if v := c.String("broker-max-procs"); v != "auto" {
				if procs, err = strconv.Atoi(v); err != nil || procs < 0 {
					return cli.Exit(fmt.Sprintf("--broker-max-procs %q: want auto, 0 (Go's default) or a count of threads", v), 2)
				}
			}
			return usageExit(loadgen.Bench(ctx, loadgen.BenchConfig{
				BrokerMaxProcs:        procs,
				Agents:                agents,
				AgentToken:            token,
				Search:                search,
				Workload:              cfg,
				AutoReplicationFactor: !c.IsSet("replication-factor"),
				Brokers:               c.Int("brokers"),
				BrokerBin:             c.String("broker-bin"),
				Out:                   c.String("out"),
				Sweep:                 sweep,
			}, c.App.Writer))
		},
	}
}

func sizeCommand() *cli.Command {
	return &cli.Command{
		Name:  "size",
		Usage: "capacity arithmetic for a workload (optionally brokers needed, from a measured run)",
		Flags: []cli.Flag{
			&cli.Float64Flag{Name: "peak-rate", Value: 5_000_000, Usage: "peak messages per second", EnvVars: env("peak-rate")},
			&cli.Float64Flag{Name: "avg-rate", Value: 500_000, Usage: "average messages per second", EnvVars: env("avg-rate")},
			&cli.Float64Flag{Name: "message-bytes", Value: 1000, EnvVars: env("message-bytes")},
			&cli.Float64Flag{Name: "retention-days", Value: 7, EnvVars: env("retention-days")},
			&cli.Float64Flag{Name: "copies", Value: 3, Usage: "replication factor", EnvVars: env("copies")},
			&cli.StringFlag{Name: "from", Usage: "result directory of a --find-max run, a fixed-rate run, or a merged distributed run (loadgen --agents, report merge)", EnvVars: env("from")},
			&cli.IntFlag{Name: "agents", Usage: "client hosts that generated the --from run (default: the agents it recorded, its client_hosts, or the runs merged)", EnvVars: env("agents")},
			&cli.BoolFlag{Name: "allow-incomplete", Usage: "extrapolate from a --from run with missing agents", EnvVars: env("allow-incomplete")},
			&cli.IntFlag{Name: "measured-brokers", Usage: "brokers in the --from run's cluster (default: the count the run recorded from the cluster's metadata)", EnvVars: env("measured-brokers")},
			&cli.Float64Flag{Name: "broker-cores", Usage: "cores of one broker host in the --from run, to weigh its broker CPU (default: the run's host for bench)", EnvVars: env("broker-cores")},
			&cli.Float64Flag{Name: "disk-per-broker", Usage: "usable disk per broker in TB (decimal) to weigh retention against; 0: not considered", EnvVars: env("disk-per-broker")},
			&cli.Float64Flag{Name: "nic-gbps", Usage: "network per host in Gbit/s, each direction: weighs the --from run's traffic and the brokers needed; 0: not considered", EnvVars: env("nic-gbps")},
			&cli.Float64Flag{Name: "consumer-groups", Value: 1, Usage: "consumer groups reading the whole stream (network egress)", EnvVars: env("consumer-groups")},
			&cli.BoolFlag{Name: "object-store", Usage: "size a remote tier: one copy of the whole retention in an object store, broker disks keep --local-retention", EnvVars: env("object-store")},
			&cli.DurationFlag{Name: "local-retention", Usage: "hot window kept on broker disks with --object-store, e.g. 6h or 48h (default: the whole retention)", EnvVars: env("local-retention")},
			&cli.Float64Flag{Name: "object-store-copies", Value: 1, Usage: "copies the object store keeps of each byte: 1 counts logical bytes (S3-style stores replicate internally); more (1.5, 3) for the raw bytes of a store you run", EnvVars: env("object-store-copies")},
			&cli.BoolFlag{Name: "json", Usage: "print the workload, the run's diagnosis and the capacity as JSON", EnvVars: env("json")},
		},
		Action: func(c *cli.Context) error {
			in := loadgen.SizeInput{PeakRate: c.Float64("peak-rate"), AvgRate: c.Float64("avg-rate"), MessageBytes: c.Float64("message-bytes"),
				RetentionDays: c.Float64("retention-days"), Copies: c.Float64("copies"), ObjectStore: c.Bool("object-store")}
			// Unset flags stay out of the input so Validate can tell a
			// tier flag given without --object-store.
			if c.IsSet("local-retention") {
				h := c.Duration("local-retention").Hours()
				in.LocalRetentionHours = &h
			}
			if in.ObjectStore || c.IsSet("object-store-copies") {
				in.ObjectStoreCopies = c.Float64("object-store-copies")
			}
			if err := in.Validate(); err != nil {
				return cli.Exit(err.Error(), 2)
			}
			if c.Int("agents") < 0 || c.Int("measured-brokers") < 0 || c.Float64("broker-cores") < 0 || c.Float64("nic-gbps") < 0 {
				return cli.Exit("size: --agents, --measured-brokers, --broker-cores and --nic-gbps must not be negative", 2)
			}
			capacity := loadgen.Size(in)
			var r *results.Result
			var diag *loadgen.Diagnosis
			res := loadgen.Resources{DiskBytes: c.Float64("disk-per-broker") * 1e12, NICBitsPerSec: c.Float64("nic-gbps") * 1e9, ConsumerGroups: c.Float64("consumer-groups")}
			if dir := c.String("from"); dir != "" {
				var err error
				if r, err = results.ReadJSON(dir); err != nil {
					return err
				}
				diag, err = loadgen.Diagnose(r, loadgen.DiagnoseOptions{Dir: dir, Agents: c.Int("agents"), Brokers: c.Int("measured-brokers"),
					NICBitsPerSec: res.NICBitsPerSec, BrokerCores: c.Float64("broker-cores"), AllowIncomplete: c.Bool("allow-incomplete")})
				if err != nil {
					return cli.Exit(fmt.Sprintf("%s: %v", dir, err), 1)
				}
				capacity.WithDiagnosis(diag, res)
			} else if res.DiskBytes > 0 || res.NICBitsPerSec > 0 {
				capacity.WithResources(res)
			}
			if c.Bool("json") {
				b, err := json.MarshalIndent(struct {
					Workload  loadgen.SizeInput  `json:"workload"`
					Diagnosis *loadgen.Diagnosis `json:"diagnosis,omitempty"`
					Capacity  loadgen.Capacity   `json:"capacity"`
				}{in, diag, capacity}, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.App.Writer, "%s\n", b)
				return err
			}
			if diag != nil {
				loadgen.WriteDiagnosis(c.App.Writer, diag, in.PeakRate)
			}
			loadgen.WriteSize(c.App.Writer, in, capacity, r)
			return nil
		},
	}
}

// signalContext ends on SIGINT or SIGTERM (or when parent ends: tests);
// loadgen and bench then write the partial result and return
// loadgen.ErrInterrupted. After the first signal the handler is removed,
// so a second one kills the process instead of waiting for the bounded
// drain.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// usageExit gives settings that cannot work exit status 2, as urfave/cli
// does for unknown flags.
func usageExit(err error) error {
	var ue *loadgen.UsageError
	if errors.As(err, &ue) || errors.Is(err, results.ErrNoDirs) {
		return cli.Exit(err.Error(), 2)
	}
	return err
}
