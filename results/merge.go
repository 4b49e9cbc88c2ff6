package results

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// mergeStartSkew: runs whose measured windows start further apart than
// this were not started together (--start-at), so their intervals do not
// line up and the summed rates overstate any one moment.
const mergeStartSkew = time.Second

// mergeWorkloadKeys are the workload settings that must agree for the
// merged histograms to describe one workload.
var mergeWorkloadKeys = []string{"message_size", "acks", "compression", "topic"}

// Merge combines runs of the same workload made by several generator
// processes (started together with --start-at) into one run. Latency
// histograms are merged interval by interval, aligned on whole seconds since
// the earliest start; counters and rates add up. What does not fit (starts
// more than a second apart, different workloads) is listed in
// Result.Warnings; the merge still happens.
func Merge(runs []*Run) (*Run, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("merge: no runs")
	}
	first := runs[0].Result
	out := &Run{Result: Result{
		Label:       "merged",
		StartedAt:   first.StartedAt,
		WarmupS:     first.WarmupS,
		MessageSize: first.MessageSize,
		SLA:         SLA{TargetP99Ms: first.SLA.TargetP99Ms},
		Workload:    first.Workload,
		Environment: first.Environment,
	}}
	res := &out.Result
	for _, r := range runs {
		in := r.Result
		if in.StartedAt.Before(res.StartedAt) {
			res.StartedAt = in.StartedAt
		}
		if in.DurationS > res.DurationS {
			res.DurationS = in.DurationS
		}
		res.TargetRate += in.TargetRate
		res.AchievedRate += in.AchievedRate
		res.ThroughputMBps += in.ThroughputMBps
		res.MessagesSent += in.MessagesSent
		res.MessagesAcked += in.MessagesAcked
		res.MessagesConsumed += in.MessagesConsumed
		res.MessagesRetried += in.MessagesRetried
		res.Retries += in.Retries
		for name, n := range in.ErrorMix {
			if res.ErrorMix == nil {
				res.ErrorMix = map[string]int64{}
			}
			res.ErrorMix[name] += n
		}
		res.Errors += in.Errors
		if res.FirstError == "" && in.FirstError != "" {
			res.FirstError = in.FirstError
			if r.Dir != "" {
				res.FirstError = r.Dir + ": " + in.FirstError
			}
		}
		if in.GeneratorSaturated {
			res.GeneratorSaturated = true
			reason := fmt.Sprintf("%s: %s", r.Dir, in.SaturationReason)
			if res.SaturationReason != "" {
				reason = res.SaturationReason + "; " + reason
			}
			res.SaturationReason = reason
		}
		res.Interrupted = res.Interrupted || in.Interrupted
		res.MergedFrom = append(res.MergedFrom, r.Dir)
	}
	res.Warnings = mergeWarnings(runs)
	res.Backlog = mergeBacklog(runs)
	res.GeneratorCPU = mergeGenerators(runs)
	res.BrokerCPU = mergeBrokerCPU(runs, &res.Warnings)
	base := res.StartedAt.UnixMilli()
	pick := func(get func(*Run) []*hdr.Histogram) []*hdr.Histogram {
		var sets [][]*hdr.Histogram
		for _, r := range runs {
			sets = append(sets, get(r))
		}
		return MergeIntervals(base, sets...)
	}
	out.Ack = pick(func(r *Run) []*hdr.Histogram { return r.Ack })
	out.E2E = pick(func(r *Run) []*hdr.Histogram { return r.E2E })
	out.SendDelay = pick(func(r *Run) []*hdr.Histogram { return r.SendDelay })
	out.Finalize()
	return out, nil
}

// mergeWarnings lists what makes runs unfit to merge: measured windows
// starting more than mergeStartSkew apart, different workloads, and
// interrupted runs.
func mergeWarnings(runs []*Run) []string {
	var warns []string
	first, last := runs[0], runs[0]
	for _, r := range runs[1:] {
		if r.Result.StartedAt.Before(first.Result.StartedAt) {
			first = r
		}
		if r.Result.StartedAt.After(last.Result.StartedAt) {
			last = r
		}
	}
	if d := last.Result.StartedAt.Sub(first.Result.StartedAt); d > mergeStartSkew {
		warns = append(warns, fmt.Sprintf("runs started %v apart (%s at %s, %s at %s): more than %v, so their windows do not line up (start generators together with --start-at)",
			d.Round(time.Millisecond), first.Dir, first.Result.StartedAt.Format(time.RFC3339Nano),
			last.Dir, last.Result.StartedAt.Format(time.RFC3339Nano), mergeStartSkew))
	}
	setting := func(r *Run, key string) string {
		if v, ok := r.Result.Workload[key]; ok {
			return v
		}
		if key == "message_size" && r.Result.MessageSize != 0 {
			return strconv.Itoa(r.Result.MessageSize)
		}
		return ""
	}
	for _, key := range mergeWorkloadKeys {
		want := setting(runs[0], key)
		for _, r := range runs[1:] {
			if got := setting(r, key); got != want {
				warns = append(warns, fmt.Sprintf("workloads differ in %s: %s has %q, %s has %q", key, runs[0].Dir, want, r.Dir, got))
			}
		}
	}
	var interrupted []string
	for _, r := range runs {
		if r.Result.Interrupted {
			interrupted = append(interrupted, r.Dir)
		}
	}
	if len(interrupted) > 0 {
		warns = append(warns, fmt.Sprintf("interrupted runs (partial windows): %s", strings.Join(interrupted, ", ")))
	}
	return warns
}

// MergeIntervals merges interval histograms from several logs into one
// timeline: intervals whose starts round to the same second after baseUnixMs
// are merged into one histogram.
func MergeIntervals(baseUnixMs int64, sets ...[]*hdr.Histogram) []*hdr.Histogram {
	bySecond := map[int64]*hdr.Histogram{}
	for _, set := range sets {
		for _, h := range set {
			sec := (h.StartTimeMs() - baseUnixMs + 500) / 1000
			m := bySecond[sec]
			if m == nil {
				m = NewHistogram()
				m.SetStartTimeMs(h.StartTimeMs())
				m.SetEndTimeMs(h.EndTimeMs())
				bySecond[sec] = m
			}
			m.Merge(h)
			if h.StartTimeMs() < m.StartTimeMs() {
				m.SetStartTimeMs(h.StartTimeMs())
			}
			if h.EndTimeMs() > m.EndTimeMs() {
				m.SetEndTimeMs(h.EndTimeMs())
			}
		}
	}
	keys := make([]int64, 0, len(bySecond))
	for k := range bySecond {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]*hdr.Histogram, 0, len(keys))
	for _, k := range keys {
		out = append(out, bySecond[k])
	}
	return out
}

// mergeBrokerCPU keeps one run's broker counters; several runs each
// measured the same brokers over their own window, so neither their sum
// nor one of them is the merged run's: they are left out, and the
// warning says where they are.
func mergeBrokerCPU(runs []*Run, warns *[]string) *BrokerCPU {
	if len(runs) == 1 {
		return runs[0].Result.BrokerCPU
	}
	var had []string
	for _, r := range runs {
		if r.Result.BrokerCPU != nil {
			had = append(had, r.Dir)
		}
	}
	if len(had) > 0 {
		*warns = append(*warns, fmt.Sprintf("broker CPU and context switches left out: each run measured the brokers over its own window (see %s)", strings.Join(had, ", ")))
	}
	return nil
}
