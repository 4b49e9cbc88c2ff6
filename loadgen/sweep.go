package loadgen

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ringlog/ringlog/results"
)

// ParsePartitions reads --partitions: one count, or a comma list of counts
// for a partition sweep.
func ParsePartitions(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("partitions %q: want a count >= 1 or a comma list of counts (8,64,256)", s)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// runSweep runs cfg once per partition count, each on a fresh topic
// (<topic>-p<count>, deleted after its run if the run created it, so idle
// partitions of earlier counts cost the later ones nothing), and writes the sweep: a result
// directory per count under dir (p<count>/), and dir's result.json and
// report.html with one row per count. dir "" writes nothing. A count
// whose run fails is a warning, and the sweep goes on with the next one.
func runSweep(ctx context.Context, cfg Config, counts []int32, dir string, out io.Writer) error {
	top := results.Result{Label: cfg.Label, TargetRate: cfg.Rate, MessageSize: cfg.MessageSize, WarmupS: cfg.Warmup.Seconds(),
		SLA: results.SLA{TargetP99Ms: float64(cfg.TargetP99) / 1e6}}
	for i, n := range counts {
		step := cfg
		step.Partitions = n
		step.Topic = fmt.Sprintf("%s-p%d", cfg.Topic, n)
		step.Label = fmt.Sprintf("%d partitions", n) // never ", 8 partitions"
		if cfg.Label != "" {
			step.Label = cfg.Label + ", " + step.Label
		}
		fmt.Fprintf(out, "sweep: %d of %d: %d partitions (topic %s)\n", i+1, len(counts), n, step.Topic)
		run, err := Run(ctx, step, out)
		if err != nil {
			top.Warnings = append(top.Warnings, fmt.Sprintf("%d partitions: %v", n, err))
			fmt.Fprintf(out, "sweep: %d partitions FAILED: %v\n", n, err)
			if ctx.Err() != nil {
				top.Interrupted = true
				break
			}
			continue
		}
		withEnvironment(run, step.BrokerAdmin, step.Client)
		sub := fmt.Sprintf("p%d", n)
		if dir != "" {
			if err := run.Write(filepath.Join(dir, sub)); err != nil {
				return err
			}
		}
		results.WriteSummary(out, &run.Result)
		if top.StartedAt.IsZero() {
			top.StartedAt, top.Environment = run.Result.StartedAt, run.Result.Environment
		}
		top.DurationS += run.Result.DurationS
		got := int(n)
		if run.Result.Spread != nil {
			got = run.Result.Spread.TopicPartitions
		}
		top.Sweep = append(top.Sweep, results.SweepRowOf(&run.Result, got, sub))
		if run.Result.Interrupted {
			top.Interrupted = true
			break
		}
		if run.Result.Workload["topic_created"] != "true" {
			top.Warnings = append(top.Warnings, fmt.Sprintf("topic %s existed before the sweep: kept, and measured with its own partition count and configs", step.Topic))
		} else if err := deleteTopic(ctx, step); err != nil {
			top.Warnings = append(top.Warnings, fmt.Sprintf("delete topic %s: %v (it stays, idle, during the later counts)", step.Topic, err))
		}
	}
	if len(top.Sweep) == 0 {
		return fmt.Errorf("partition sweep: no count ran: %s", strings.Join(top.Warnings, "; "))
	}
	w := cfg.workload()
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = strconv.Itoa(int(n))
	}
	w["partitions"], w["topic"] = strings.Join(parts, ","), cfg.Topic+"-p<partitions>"
	if cfg.Keys == KeysAuto {
		w["keys"] = "auto"
	}
	w["key_distribution"] = "keyed over all partitions"
	if cfg.Keys == 0 {
		w["key_distribution"] = "sticky (null keys)"
	}
	delete(w, "bootstrap")
	top.Workload = w
	if dir != "" {
		if err := results.WriteSweepDir(dir, &top); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	results.WriteSummary(out, &top)
	if dir != "" {
		fmt.Fprintf(out, "report: %s\n", dir)
	}
	if top.Interrupted {
		return ErrInterrupted
	}
	return nil
}

// deleteTopic removes a sweep step's topic.
func deleteTopic(ctx context.Context, cfg Config) error {
	adm, _, ctx, done, err := cfg.adminClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := adm.DeleteTopic(ctx, cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	return err
}
