package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/ringlog/ringlog/internal/launch"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringlog/ringlog/internal/procstat"
)

// LocalBroker is a broker process started on loopback for a benchmark.
type LocalBroker struct {
	Addr, AdminAddr, DataDir string
	proc                     *launch.Broker
}

// StartLocalBroker runs `bin serve --listen A --data-dir D --admin-listen B`
// and waits until it is ready (its /healthz says "ok").
func StartLocalBroker(bin, dataDir string, logTo io.Writer) (*LocalBroker, error) {
	return startLocalBroker(bin, dataDir, logTo, 0)
}

// startLocalBroker is StartLocalBroker with the broker's GOMAXPROCS.
func startLocalBroker(bin, dataDir string, logTo io.Writer, procs int) (*LocalBroker, error) {
	b, err := launchLocalBroker(bin, dataDir, logTo, procs)
	if err != nil {
		return nil, err
	}
	return b, b.waitReady()
}

// StartLocalCluster runs n brokers on loopback that form one cluster, each
// a controller voter (combined mode) with its own data dir under dir, and
// waits until every one is ready (a ringlog broker reports ready once it
// has joined the cluster). procs is each broker's GOMAXPROCS (0: Go's
// default; see launch.SplitMaxProcs).
func StartLocalCluster(bin, dir string, n, procs int, logTo io.Writer) ([]*LocalBroker, error) {
	ctrl := make([]string, n)
	var voters string
	for i := range ctrl {
		var err error
		if ctrl[i], err = launch.FreePort(); err != nil {
			return nil, err
		}
		if i > 0 {
			voters += ","
		}
		voters += fmt.Sprintf("%d@%s", i+1, ctrl[i])
	}
	var bs []*LocalBroker
	stopAll := func() {
		for _, b := range bs {
			b.Stop()
		}
	}
	for i := range n {
		b, err := launchLocalBroker(bin, filepath.Join(dir, fmt.Sprintf("node-%d", i+1)), logTo, procs,
			"--node-id", fmt.Sprint(i+1), "--controller-listen", ctrl[i], "--controller-voters", voters)
		if err != nil {
			stopAll()
			return nil, err
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		if err := b.waitReady(); err != nil {
			stopAll()
			return nil, err
		}
	}
	return bs, nil
}

func launchLocalBroker(bin, dataDir string, logTo io.Writer, procs int, extra ...string) (*LocalBroker, error) {
	addr, err := launch.FreePort()
	if err != nil {
		return nil, err
	}
	admin, err := launch.FreePort()
	if err != nil {
		return nil, err
	}
	p := &launch.Broker{
		Bin:    bin,
		Args:   append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--admin-listen", admin}, extra...),
		Addr:   addr,
		Admin:  admin,
		Env:    launch.MaxProcsEnv(procs),
		Output: logTo,
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &LocalBroker{Addr: addr, AdminAddr: admin, DataDir: dataDir, proc: p}, nil
}

// waitReady waits until the broker's /healthz says "ok": its Kafka
// listener accepts and it has joined the cluster. Its admin endpoint
// answers by then too, which the run's counters need (a run that found no
// admin endpoint would count the broker's context switches without its
// exited threads).
func (b *LocalBroker) waitReady() error {
	if _, err := b.proc.WaitReady(context.Background(), 30*time.Second); err != nil {
		b.Stop()
		return fmt.Errorf("broker %s: %w", b.proc.Bin, err)
	}
	return nil
}

// Pid is the broker's process id (tests pause it with SIGSTOP).
func (b *LocalBroker) Pid() int { return b.proc.Pid() }

// Stop sends SIGTERM, and SIGKILL if the broker has not exited in 10 s.
func (b *LocalBroker) Stop() error { return b.proc.Stop(10 * time.Second) }

// BenchConfig is `ringlog bench`: local brokers on loopback, one
// workload against them, the report.
type BenchConfig struct {
	// Workload is what the run does; Bootstrap and BrokerAdmin are
	// replaced by the local brokers' addresses, Label "" becomes "bench".
	Workload Config
	// AutoReplicationFactor sets Workload.ReplicationFactor to
	// min(Brokers, 3) (the flag was not given). min.insync.replicas is
	// min(replication factor, 2) unless Workload.TopicConfigs sets it.
	AutoReplicationFactor bool
	Brokers               int    // 1..9, all controller voters
	BrokerBin             string // "": this executable
	// BrokerMaxProcs is each broker's GOMAXPROCS: 0 Go's default, -1
	// (DefaultBenchConfig) launch.SplitMaxProcs(Brokers), the machine's cores
	// split among them.
	BrokerMaxProcs int
	Out            string // report directory; "": bench-results/<time>
	// Sweep, with more than one count, runs the workload once per
	// partition count on a fresh topic each (runSweep) against the same
	// brokers; one count replaces Workload.Partitions.
	Sweep []int32
	// Search, when its FindMax is set, runs the find-max search instead
	// of one run (only its FindMax* fields are used; not with a sweep).
	Search Options
	// Agents and AgentToken run the workload on load agents instead of
	// in this process (fleet.go); they must reach the local brokers.
	Agents     []string
	AgentToken string
}

// DefaultBenchConfig is the standard bench workload: 20,000 msg/s of
// 1,000-byte messages (the size the design is measured at) on 8
// partitions of 3 brokers, one consumer, 20 s after 3 s of warmup.
func DefaultBenchConfig() BenchConfig {
	d := DefaultConfig()
	d.Duration = 20 * time.Second
	d.Warmup = 3 * time.Second
	d.Rate = 20_000
	d.MessageSize = 1000
	d.Partitions = 8
	d.Consumers = 1
	d.Topic = "ringlog-bench"
	return BenchConfig{Workload: d, AutoReplicationFactor: true, Brokers: 3, BrokerMaxProcs: -1}
}

// Bench starts the brokers, runs the workload until ctx ends or the run is
// over, writes the report directory and prints the summary and the p99
// verdict to out; the brokers are stopped on return. Settings that cannot
// work are a *UsageError.
func Bench(ctx context.Context, bc BenchConfig, out io.Writer) error {
	n := bc.Brokers
	if n < 1 || n > 9 {
		return usageErrorf("bench: --brokers %d: want 1..9", n)
	}
	if len(bc.Agents) > 0 {
		o := bc.Search
		o.Config, o.Sweep, o.Agents, o.AgentToken = bc.Workload, bc.Sweep, bc.Agents, bc.AgentToken
		if err := validateFleet(o); err != nil {
			return &UsageError{err}
		}
	}
	if bc.Search.FindMax && len(bc.Sweep) > 1 {
		return usageErrorf("bench: --find-max searches one partition count; a sweep (--partitions with a list) runs each at --rate")
	}
	bin := bc.BrokerBin
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "ringlog-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logf, err := os.Create(filepath.Join(tmp, "broker.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	procs := bc.BrokerMaxProcs
	if procs < 0 {
		procs = launch.SplitMaxProcs(n)
	}
	var brokers []*LocalBroker
	if n == 1 {
		b, err := startLocalBroker(bin, filepath.Join(tmp, "data"), logf, procs)
		if err != nil {
			return err
		}
		brokers = []*LocalBroker{b}
	} else if brokers, err = StartLocalCluster(bin, tmp, n, procs, logf); err != nil {
		return err
	}
	defer func() {
		for _, b := range brokers {
			b.Stop()
		}
	}()
	broker := brokers[0]
	w := bc.Workload
	if len(bc.Sweep) > 0 {
		w.Partitions = bc.Sweep[0]
	}
	cfg, err := benchConfig(w, brokers)
	if err != nil {
		return &UsageError{err}
	}
	if bc.AutoReplicationFactor {
		cfg.ReplicationFactor = int16(min(n, 3))
	}
	if int(cfg.ReplicationFactor) > n {
		return usageErrorf("bench: --replication-factor %d with %d broker(s)", cfg.ReplicationFactor, n)
	}
	// Run creates the topic with these configs and records them in the
	// workload; a --topic-config min.insync.replicas wins.
	if cfg.TopicConfigs == nil {
		cfg.TopicConfigs = map[string]string{}
	}
	if _, ok := cfg.TopicConfigs["min.insync.replicas"]; !ok && cfg.ReplicationFactor > 0 {
		cfg.TopicConfigs["min.insync.replicas"] = strconv.Itoa(min(int(cfg.ReplicationFactor), 2))
	}
	if err := waitForReplicas(ctx, cfg); err != nil {
		return err
	}
	fmt.Fprintf(out, "bench: %d broker(s), topic replication factor %d, min.insync.replicas %s, acks %s\n",
		n, cfg.ReplicationFactor, cfg.TopicConfigs["min.insync.replicas"], acksName(cfg.Acks))
	if procs > 0 {
		fmt.Fprintf(out, "bench: each broker runs with GOMAXPROCS %d: %d cores shared by %d brokers and the generator (--broker-max-procs 0: Go's default)\n",
			procs, runtime.GOMAXPROCS(0), n)
	}
	dir := bc.Out
	if dir == "" {
		dir = filepath.Join("bench-results", time.Now().Format("20060102-150405"))
	}
	fmt.Fprintf(out, "bench: broker %s (admin %s), %.0f msg/s of %d bytes for %v after %v warmup\n",
		broker.Addr, broker.AdminAddr, cfg.Rate, cfg.MessageSize, cfg.Duration, cfg.Warmup)
	if len(bc.Agents) > 0 {
		run, err := runFleet(ctx, cfg, bc.Agents, bc.AgentToken, dir, out)
		if err != nil {
			return err
		}
		return finishFleet(run, dir, out)
	}
	if len(bc.Sweep) > 1 {
		return runSweep(ctx, cfg, bc.Sweep, dir, out)
	}
	run, err := runOrSearch(ctx, cfg, bc.Search, out)
	if err != nil {
		return err
	}
	return finish(run, cfg, dir, out)
}

// benchConfig points the workload at the local brokers; reports read
// io_path and fsync from the first one's /healthz, and the CPU time and
// context switches of their processes.
func benchConfig(cfg Config, bs []*LocalBroker) (Config, error) {
	cfg.Bootstrap = nil
	for _, b := range bs {
		cfg.Bootstrap = append(cfg.Bootstrap, b.Addr)
	}
	cfg.BrokerAdmin = bs[0].AdminAddr
	cfg.BrokerPIDs, cfg.CounterAdmins = benchCounterSources(bs)
	if cfg.Label == "" {
		cfg.Label = "bench"
	}
	return cfg, cfg.Validate()
}

// benchCounterSources is how the run reads each broker's counters: through
// its admin endpoint when it serves /v1/process/counters for this very
// process (ringlog: getrusage keeps the switches of threads that exited,
// such as idle io-wq workers), otherwise by pid from /proc (any other
// --broker-bin, such as bin/fakebroker).
func benchCounterSources(bs []*LocalBroker) (pids []int, admins []string) {
	for _, b := range bs {
		src, err := newAdminSource(b.AdminAddr)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), countersTimeout)
			var snap procstat.Snapshot
			snap, err = src.read(ctx)
			cancel()
			if err == nil && snap.PID == b.Pid() && snap.ExitedIncluded {
				admins = append(admins, b.AdminAddr)
				continue
			}
		}
		pids = append(pids, b.Pid())
	}
	return pids, admins
}

// adminClient is an admin client of the workload's cluster and a context
// bounding its calls to 30 s; done closes the client.
func (c Config) adminClient(ctx context.Context) (adm *kadm.Client, cl *kgo.Client, actx context.Context, done func(), err error) {
	opts, err := c.kgoOpts(clientID + "-admin")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cl, err = kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	return kadm.NewClient(cl), cl, actx, func() { cancel(); cl.Close() }, nil
}

// waitForReplicas waits until the cluster would create the bench topic:
// a broker accepts Kafka connections before the controller counts every
// broker as available, and until then an RF=3 topic is refused with
// INVALID_REPLICATION_FACTOR. It asks with a validate-only CreateTopics.
func waitForReplicas(ctx context.Context, cfg Config) error {
	adm, _, ctx, done, err := cfg.adminClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	for {
		resp, err := adm.ValidateCreateTopics(ctx, cfg.Partitions, cfg.ReplicationFactor, nil, cfg.Topic)
		if err == nil {
			err = resp.Error()
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		if !errors.Is(err, kerr.InvalidReplicationFactor) && !kerr.IsRetriable(err) {
			return fmt.Errorf("create topic %s: %w", cfg.Topic, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create topic %s: brokers not all available: %v (%w)", cfg.Topic, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
