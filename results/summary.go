package results

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteSummary prints a human summary of one result.
func WriteSummary(w io.Writer, r *Result) {
	// The answer first: the rest of the summary says why.
	fmt.Fprintln(w, VerdictOf(r).Headline(r))
	if len(r.Sweep) > 0 {
		writeSweepSummary(w, r)
		return
	}
	label := RunName(r, "")
	// Outside the table: a long label would widen every row's column.
	fmt.Fprintf(w, "run %s: started %s, %.1f s measured after %.1f s warmup\n",
		label, r.StartedAt.Format("2006-01-02 15:04:05"), r.DurationS, r.WarmupS)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "rate\ttarget %.0f msg/s\tachieved %.0f msg/s (%.1f MB/s of %d-byte messages)\n",
		r.TargetRate, r.AchievedRate, r.ThroughputMBps, r.MessageSize)
	if p := r.Spread; p != nil {
		fmt.Fprintf(tw, "workload\t%s\t%s\n", p.Label(), p.Detail())
	}
	fmt.Fprintf(tw, "messages\tsent %d\tacked %d, errors %d\n", r.MessagesSent, r.MessagesAcked, r.Errors)
	if b := r.Backlog; b != nil {
		what, detail := b.Summary()
		fmt.Fprintf(tw, "backlog\t%s\t%s\n", what, detail)
	}
	if c := r.BrokerCPU; c != nil {
		fmt.Fprintf(tw, "broker CPU\t%.1f CPU-s/GB\t%.2f CPU-s over %.1f s, %d broker process(es)\n", c.PerGB, c.Seconds, c.WindowS, c.Processes)
		writeBrokerCounters(tw, c)
	}
	if g := r.GeneratorCPU; g != nil && g.WindowS > 0 {
		cores := fmt.Sprintf("%.2f cores", g.Seconds/g.WindowS)
		if g.Cores > 0 {
			cores += fmt.Sprintf(" of %d", g.Cores)
		}
		what := fmt.Sprintf("%.2f CPU-s over %.1f s", g.Seconds, g.WindowS)
		if g.Processes > 1 {
			what += fmt.Sprintf(", %d generators", g.Processes)
		}
		fmt.Fprintf(tw, "generator CPU\t%s\t%s\n", cores, what)
		if g.MachineBusyCores > 0 {
			fmt.Fprintf(tw, "machine CPU\t%.2f cores busy of %d\tevery process and the kernel's own threads\n", g.MachineBusyCores, g.Cores)
		}
	}
	if r.Retries > 0 || r.MessagesRetried > 0 {
		fmt.Fprintf(tw, "retries\t%d requests\t%d messages re-sent\n", r.Retries, r.MessagesRetried)
	}
	if len(r.ErrorMix) > 0 {
		fmt.Fprintf(tw, "error mix\t%s\n", FormatErrorMix(r.ErrorMix))
	}
	if r.FirstError != "" {
		fmt.Fprintf(tw, "first error\t%s\n", r.FirstError)
	}
	fmt.Fprintf(tw, "latency ms\tp50\tp90\tp99\tp99.9\tmax\n")
	row := func(name string, p Percentiles) {
		fmt.Fprintf(tw, "  %s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", name, p.P50, p.P90, p.P99, p.P999, p.Max)
	}
	row("ack", r.AckLatencyMs)
	if r.E2ELatencyMs != nil {
		row("end-to-end", *r.E2ELatencyMs)
	}
	row("send delay", r.SendDelayMs)
	tw.Flush()
	writeBrokerRows(w, r.BrokerCPU)
	if r.Interrupted {
		planned := r.Workload["duration"]
		if planned == "" {
			planned = "?"
		}
		fmt.Fprintf(w, "INTERRUPTED: %.1f s of the planned %s measured; rates are over the time measured\n", r.DurationS, planned)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	if r.GeneratorSaturated {
		fmt.Fprintf(w, "WARNING: generator saturated (%s): latencies are not the broker's alone\n", r.SaturationReason)
	}
	if r.Incomplete {
		fmt.Fprintf(w, "INCOMPLETE: %s\n", orUnknown(r.IncompleteReason))
	}
	WriteAgents(w, r.Agents)
	if r.FindMax != nil {
		WriteSteps(w, r.FindMax)
	}
	fmt.Fprintln(w, Verdict(r))
}

// writeBrokerCounters adds the cost per acknowledged message to the
// summary table: summed over the brokers, by thread name, and per broker
// when there are several.
func writeBrokerCounters(tw io.Writer, c *BrokerCPU) {
	if c.MessagesAcked <= 0 {
		return
	}
	who := "all brokers"
	if len(c.Brokers) == 1 {
		who = c.Brokers[0].Label()
	}
	sw := c.CtxSwitches
	if sw == nil {
		fmt.Fprintf(tw, "per acked msg\t%.1f CPU-µs\t%s, %d messages\n", c.CPUMicrosPerMsg, who, c.MessagesAcked)
		return
	}
	fmt.Fprintf(tw, "per acked msg\t%.1f CPU-µs\t%.2f ctx switches (%.2f voluntary, %.2f involuntary), %s, %d messages\n",
		c.CPUMicrosPerMsg, sw.PerMsg, perMsg(float64(sw.Voluntary), c.MessagesAcked), perMsg(float64(sw.Involuntary), c.MessagesAcked), who, c.MessagesAcked)
	if t := threadsCell(sw, c.MessagesAcked, 5); t != "" {
		fmt.Fprintf(tw, "  switches by thread\t\t%s\n", t)
	}
	if n := exitedNote(sw); n != "" {
		fmt.Fprintf(tw, "  exited threads\t\t%s\n", n)
	}
}

// writeBrokerRows is the cost per acknowledged message of each broker,
// when there are several: a table of its own, below the summary's, so
// long process names do not widen that one.
func writeBrokerRows(w io.Writer, c *BrokerCPU) {
	if c == nil || c.MessagesAcked <= 0 || len(c.Brokers) < 2 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "per acked msg\tCPU-µs\tctx switches\tby thread")
	for _, b := range c.Brokers {
		sw, threads := "-", ""
		if bs := b.CtxSwitches; bs != nil {
			sw, threads = fmt.Sprintf("%.2f", bs.PerMsg), threadsCell(bs, c.MessagesAcked, 3)
			if n := exitedNote(bs); n != "" {
				threads += "; " + n
			}
		}
		fmt.Fprintf(tw, "  %s\t%.1f\t%s\t%s\n", b.Label(), b.CPUMicrosPerMsg, sw, threads)
	}
	tw.Flush()
}

// Verdict is the one-line SLA verdict.
func Verdict(r *Result) string {
	word := "FAIL"
	if r.SLA.Pass && !r.Incomplete {
		word = "PASS"
	}
	incomplete := ""
	if r.Incomplete {
		incomplete = ", run incomplete"
	}
	note := ""
	if n := contentionNote(r); n != "" {
		note = " — " + n
	}
	return fmt.Sprintf("SLA %s: ack p99 %.3f ms (target %.3f ms), %d errors%s%s",
		word, r.AckLatencyMs.P99, r.SLA.TargetP99Ms, r.Errors, incomplete, note)
}

// WriteSteps prints a find-max step table.
func WriteSteps(w io.Writer, fm *FindMax) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cpu := false
	for _, s := range fm.Steps {
		cpu = cpu || s.CPUPerGB > 0
	}
	head := "step\ttarget msg/s\tachieved\tp50 ms\tp99 ms\tmax ms\terrors\tsaturated\tpass\t"
	if cpu {
		head += "CPU-s/GB\tCPU-µs/msg\tctx sw/msg\t"
	}
	fmt.Fprintln(tw, head)
	for i, s := range fm.Steps {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%v\t%v\t",
			i+1, s.TargetRate, s.AchievedRate, s.P50Ms, s.P99Ms, s.MaxMs, s.Errors, s.Saturated, s.Pass)
		if cpu {
			fmt.Fprintf(tw, "%.1f\t%.1f\t%.2f\t", s.CPUPerGB, s.CPUMicrosPerMsg, s.CtxSwitchesPerMsg)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(w, "max rate with p99 <= %.3f ms and no errors: %.0f msg/s\n", fm.TargetP99Ms, fm.MaxPassingRate)
}

// WriteCompare prints runs side by side, one column per run.
func WriteCompare(w io.Writer, runs []*Run) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cells := func(name string, f func(r *Result) string) {
		parts := []string{name}
		for _, r := range runs {
			parts = append(parts, f(&r.Result))
		}
		fmt.Fprintln(tw, strings.Join(parts, "\t")+"\t")
	}
	// Every column is named: an unlabelled run by its directory.
	names := runNames(runs)
	head := append([]string{"run"}, names...)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	cells("workload", func(r *Result) string { return spreadCell(r.Spread, true) })
	cells("target msg/s", func(r *Result) string { return fmt.Sprintf("%.0f", r.TargetRate) })
	cells("achieved msg/s", func(r *Result) string { return fmt.Sprintf("%.0f", r.AchievedRate) })
	cells("MB/s", func(r *Result) string { return fmt.Sprintf("%.1f", r.ThroughputMBps) })
	cells("errors", func(r *Result) string { return fmt.Sprint(r.Errors) })
	cells("retries", func(r *Result) string { return fmt.Sprint(r.Retries) })
	for _, q := range []struct {
		name string
		f    func(p Percentiles) float64
	}{
		{"ack p50 ms", func(p Percentiles) float64 { return p.P50 }},
		{"ack p90 ms", func(p Percentiles) float64 { return p.P90 }},
		{"ack p99 ms", func(p Percentiles) float64 { return p.P99 }},
		{"ack p99.9 ms", func(p Percentiles) float64 { return p.P999 }},
		{"ack max ms", func(p Percentiles) float64 { return p.Max }},
	} {
		cells(q.name, func(r *Result) string { return fmt.Sprintf("%.3f", q.f(r.AckLatencyMs)) })
	}
	cells("e2e p99 ms", func(r *Result) string {
		if r.E2ELatencyMs == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", r.E2ELatencyMs.P99)
	})
	cells("send delay p99 ms", func(r *Result) string { return fmt.Sprintf("%.3f", r.SendDelayMs.P99) })
	cells("broker CPU-s/GB", func(r *Result) string { return cpuCell(r.BrokerCPU) })
	cells("broker CPU-µs/msg", func(r *Result) string { return cpuUsPerMsgCell(r.BrokerCPU) })
	cells("broker ctx switches/msg", func(r *Result) string { return switchesPerMsgCell(r.BrokerCPU) })
	cells("generator cores", func(r *Result) string { return generatorCoresCell(r.GeneratorCPU) })
	cells("machine busy cores", func(r *Result) string { return machineCoresCell(r.GeneratorCPU) })
	cells("saturated", func(r *Result) string { return fmt.Sprint(r.GeneratorSaturated) })
	cells("SLA", func(r *Result) string {
		if r.SLA.Pass {
			return "pass"
		}
		return "fail"
	})
	cells("io path", func(r *Result) string { return orDash(r.Environment.BrokerIOPath) })
	cells("fsync", func(r *Result) string { return orDash(r.Environment.BrokerFsync) })
	cells("broker GOMAXPROCS", func(r *Result) string { return maxProcs(r.Environment) })
	cells("broker scheduling", func(r *Result) string { return orDash(r.Environment.BrokerSchedPolicy) })
	cells("broker version", func(r *Result) string { return orDash(r.Environment.BrokerVersion) })
	cells("partitions", func(r *Result) string { return fmt.Sprint(r.Environment.Partitions) })
	cells("RF / min ISR", func(r *Result) string {
		return fmt.Sprintf("%d/%d", r.Environment.ReplicationFactor, r.Environment.MinISR)
	})
	cells("acks", func(r *Result) string { return orDash(r.Environment.Acks) })
	cells("client hosts", func(r *Result) string { return fmt.Sprint(r.Environment.ClientHosts) })
	tw.Flush()
	writeRatios(w, runs)
	// The mixes are too wide for a column each.
	for i, r := range runs {
		if len(r.Result.ErrorMix) > 0 {
			fmt.Fprintf(w, "error mix %s: %s\n", names[i], FormatErrorMix(r.Result.ErrorMix))
		}
	}
}

// FormatErrorMix renders an error mix as "NAME: n, NAME: n", most
// frequent first.
func FormatErrorMix(mix map[string]int64) string {
	names := errorMixNames(mix)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s: %d", k, mix[k])
	}
	return strings.Join(parts, ", ")
}

// errorMixNames lists the causes of a mix, most frequent first.
func errorMixNames(mix map[string]int64) []string {
	names := make([]string, 0, len(mix))
	for k := range mix {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if mix[names[i]] != mix[names[j]] {
			return mix[names[i]] > mix[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}
