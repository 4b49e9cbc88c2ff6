package results

import (
	"fmt"
	"sort"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Merge combines runs of the same workload made by several generator
// processes (started together with --start-at) into one run. Latency
// histograms are merged interval by interval, aligned on whole seconds since
// the earliest start; counters and rates add up.
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
		res.Errors += in.Errors
		if res.FirstError == "" {
			res.FirstError = in.FirstError
		}
		if in.GeneratorSaturated {
			res.GeneratorSaturated = true
			res.SaturationReason = fmt.Sprintf("%s: %s", r.Dir, in.SaturationReason)
		}
		res.MergedFrom = append(res.MergedFrom, r.Dir)
	}
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
