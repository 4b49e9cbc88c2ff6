package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ringlog/ringlog/loadgen/nullsink"
	"github.com/ringlog/ringlog/results"
)

// Options is one `ringlog loadgen` invocation: the workload plus what runs
// around it (a find-max search instead of one run, an in-process null sink
// instead of a cluster, the report directory).
type Options struct {
	Config Config
	// Out is the report directory (result.json, .hgrm, .hlog,
	// report.html, profiles); "" writes none.
	Out string
	// FindMax steps the rate up from Config.Rate and bisects to the
	// highest rate meeting Config.TargetP99 without errors.
	FindMax          bool
	FindMaxSteps     int     // most steps of the search
	FindMaxPrecision float64 // stop when the bracket is this fraction of the rate
	FindMaxRetries   int     // re-runs of a failing rate before it counts as failed
	// NullSink ignores Config.Bootstrap and produces into an in-process
	// sink that discards data (it measures the generator); with
	// NullSinkError (a Kafka error name or code) it refuses every produce.
	NullSink      bool
	NullSinkError string
	// Sweep, with more than one count, runs Config once per partition
	// count on a fresh topic each (runSweep); Config.Partitions is unused.
	Sweep []int32
	// Agents, when set, runs the workload on these load agents (host:port
	// of `ringlog loadgen agent`), split between them (fleet.go);
	// AgentToken is the token they were started with.
	Agents     []string
	AgentToken string
}

// DefaultOptions are the loadgen command's defaults.
func DefaultOptions() Options {
	return Options{Config: DefaultConfig(), FindMaxSteps: 12, FindMaxPrecision: 0.05, FindMaxRetries: 1}
}

// Validate checks the workload, and the options against it and each
// other.
func (o *Options) Validate() error {
	if err := o.Config.Validate(); err != nil {
		return err
	}
	switch {
	case len(o.Config.ProfileBrokers) > 0 && o.Out == "":
		return errors.New("--profile-broker needs --out: the profiles are written next to the report")
	case len(o.Config.ProfileBrokers) > 0 && o.FindMax:
		return errors.New("--profile-broker profiles one measured window; it does not combine with --find-max")
	case o.NullSink && o.Config.Security != (Security{}):
		return errors.New("--null-sink is an in-process plaintext sink: it takes no --tls-* or --sasl-* options")
	case !o.NullSink && o.NullSinkError != "":
		return errors.New("--null-sink-error needs --null-sink")
	case len(o.Sweep) > 1 && (o.FindMax || o.NullSink || len(o.Config.ProfileBrokers) > 0):
		return errors.New("a partition sweep (--partitions with a comma list) does not combine with --find-max, --null-sink or --profile-broker")
	}
	if _, err := kafkaErrorCode(o.NullSinkError); err != nil {
		return fmt.Errorf("--null-sink-error: %v", err)
	}
	return nil
}

// UsageError is a setting the command line should reject (exit status 2)
// rather than a failure of the run.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usageErrorf(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// ErrInterrupted is what Execute and Bench return after writing the
// partial result of a run whose context ended (SIGINT or SIGTERM).
var ErrInterrupted = errors.New("interrupted: the result covers the time measured before the signal")

// Execute checks o, runs the workload (or the find-max search) until ctx
// ends or the run is over, writes the report directory and prints the
// summary to stdout; progress goes to stdout, warnings to stderr. Options
// that do not pass Validate are a *UsageError, returned before any
// connection.
func Execute(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	cfg := o.Config
	for _, w := range cfg.Security.Warnings() {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err := o.Validate(); err != nil {
		return &UsageError{err}
	}
	if len(o.Agents) > 0 {
		if err := validateFleet(o); err != nil {
			return &UsageError{err}
		}
		if o.Out == "" {
			return usageErrorf("--agents needs --out: the agents' parts and the merged result are written there")
		}
		run, err := runFleet(ctx, cfg, o.Agents, o.AgentToken, o.Out, stdout)
		if err != nil {
			return err
		}
		return finishFleet(run, o.Out, stdout)
	}
	if o.NullSink {
		code, err := kafkaErrorCode(o.NullSinkError)
		if err != nil {
			return err
		}
		sink, err := nullsink.Listen("127.0.0.1:0", cfg.Partitions)
		if err != nil {
			return err
		}
		defer sink.Close()
		sink.FailProduce(code)
		cfg.Bootstrap = []string{sink.Addr()}
	}
	if len(o.Sweep) > 1 {
		return runSweep(ctx, cfg, o.Sweep, o.Out, stdout)
	}
	run, err := runOrSearch(ctx, cfg, o, stdout)
	if err != nil {
		return err
	}
	return finish(run, cfg, o.Out, stdout)
}

// runOrSearch runs cfg once, or the find-max search when o.FindMax (its
// other fields are not used).
func runOrSearch(ctx context.Context, cfg Config, o Options, out io.Writer) (*results.Run, error) {
	if !o.FindMax {
		return Run(ctx, cfg, out)
	}
	run, err := findMaxRun(ctx, cfg, FindMaxConfig{
		StartRate: cfg.Rate, TargetP99: float64(cfg.TargetP99) / 1e6,
		Precision: o.FindMaxPrecision, MaxSteps: o.FindMaxSteps, Retries: o.FindMaxRetries,
	}, out)
	if run != nil && err != nil && ctx.Err() != nil {
		run.Result.Interrupted, err = true, nil // keep what the search found
	}
	return run, err
}

// findMaxRun searches, keeping the full run of the highest passing step (or
// the last step when none passed) as the main result.
func findMaxRun(ctx context.Context, cfg Config, fc FindMaxConfig, out io.Writer) (*results.Run, error) {
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
			if c := res.BrokerCPU; c != nil {
				s.CPUPerGB, s.CPUMicrosPerMsg = c.PerGB, c.CPUMicrosPerMsg
				if c.CtxSwitches != nil {
					s.CtxSwitchesPerMsg = c.CtxSwitches.PerMsg
				}
			}
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
func finish(run *results.Run, cfg Config, dir string, out io.Writer) error {
	withEnvironment(run, cfg.BrokerAdmin, cfg.Client)
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
