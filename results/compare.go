package results

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// `ringlog report compare` puts runs of one workload side by side (for
// example ringlog and another Kafka-compatible cluster): a table of each
// run's numbers with its ratio to the first run, and the ack latency
// percentile plots overlaid in one chart.

// compareMetric is one row of the ratio table; ok is false where the run
// has no such number (no broker CPU measured, no consumers).
type compareMetric struct {
	name string
	f    func(r *Result) (v float64, ok bool)
}

func always(f func(r *Result) float64) func(r *Result) (float64, bool) {
	return func(r *Result) (float64, bool) { return f(r), true }
}

var compareMetrics = []compareMetric{
	{"ack p50 ms", always(func(r *Result) float64 { return r.AckLatencyMs.P50 })},
	{"ack p99 ms", always(func(r *Result) float64 { return r.AckLatencyMs.P99 })},
	{"ack p99.9 ms", always(func(r *Result) float64 { return r.AckLatencyMs.P999 })},
	{"ack max ms", always(func(r *Result) float64 { return r.AckLatencyMs.Max })},
	{"achieved msg/s", always(func(r *Result) float64 { return r.AchievedRate })},
	{"MB/s", always(func(r *Result) float64 { return r.ThroughputMBps })},
	{"e2e p99 ms", func(r *Result) (float64, bool) {
		if r.E2ELatencyMs == nil {
			return 0, false
		}
		return r.E2ELatencyMs.P99, true
	}},
	{"broker CPU-s/GB", func(r *Result) (float64, bool) {
		if r.BrokerCPU == nil {
			return 0, false
		}
		return r.BrokerCPU.PerGB, true
	}},
	{"broker CPU-µs/msg", func(r *Result) (float64, bool) {
		if c := r.BrokerCPU; c != nil && c.MessagesAcked > 0 {
			return c.CPUMicrosPerMsg, true
		}
		return 0, false
	}},
	{"broker ctx switches/msg", func(r *Result) (float64, bool) {
		if c := r.BrokerCPU; c != nil && c.MessagesAcked > 0 && c.CtxSwitches != nil {
			return c.CtxSwitches.PerMsg, true
		}
		return 0, false
	}},
	// The whole machine, the kernel's own threads included: a change that
	// moves work from the brokers into kernel threads shows here.
	{"machine busy cores", func(r *Result) (float64, bool) {
		if g := r.GeneratorCPU; g != nil && g.MachineBusyCores > 0 {
			return g.MachineBusyCores, true
		}
		return 0, false
	}},
}

// ratioCell is run's value of m divided by base's, "-" when either is
// missing or the base is zero.
func ratioCell(m compareMetric, base, run *Result) string {
	b, okb := m.f(base)
	v, ok := m.f(run)
	if !ok || !okb || b == 0 {
		return "-"
	}
	return fmt.Sprintf("x%.2f", v/b)
}

func valueCell(m compareMetric, r *Result) string {
	v, ok := m.f(r)
	if !ok {
		return "-"
	}
	if strings.HasSuffix(m.name, "msg/s") {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// runNames labels each run for the column heads of `report compare`: by
// its label, else its workload's or its directory's name (RunName), and,
// where two runs would read the same, by the directory as given too. No
// name is ever blank.
func runNames(runs []*Run) []string {
	names := make([]string, len(runs))
	seen := map[string]int{}
	for i, r := range runs {
		names[i] = RunName(&r.Result, r.Dir)
		if r.Dir == "" && strings.TrimSpace(r.Result.Label) == "" && names[i] == "unlabelled run" {
			names[i] = fmt.Sprintf("run %d", i+1)
		}
		seen[names[i]]++
	}
	for i, r := range runs {
		switch {
		case seen[names[i]] < 2 || r.Dir == "":
		case dirName(r.Dir) == names[i]:
			// Two directories of one name (x/run, y/run): the paths tell them apart.
			names[i] = filepath.Clean(r.Dir)
		default:
			names[i] += " (" + r.Dir + ")"
		}
	}
	return names
}

// writeRatios prints every run's numbers as a ratio to the first run's.
func writeRatios(w io.Writer, runs []*Run) {
	if len(runs) < 2 {
		return
	}
	names := runNames(runs)
	fmt.Fprintf(w, "ratio to %s (lower latency and CPU, higher rate is better)\n", names[0])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "\t"
	for _, n := range names[1:] {
		head += n + "\t"
	}
	fmt.Fprintln(tw, head)
	base := &runs[0].Result
	for _, m := range compareMetrics {
		row := m.name + "\t"
		for _, r := range runs[1:] {
			row += ratioCell(m, base, &r.Result) + "\t"
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}

// RenderCompareHTML is compare.html: verdicts, the value and ratio table,
// what each run was measured against, and the overlaid percentile plot.
func RenderCompareHTML(runs []*Run) []byte {
	var b bytes.Buffer
	names := runNames(runs)
	pageStart(&b, "ringlog comparison", strings.Join(names, " vs "), nil)
	b.WriteString(`<table id="compare"><tr><th class="head">run</th>`)
	for _, n := range names {
		fmt.Fprintf(&b, `<th class="head run">%s</th>`, html.EscapeString(n))
	}
	b.WriteString("</tr><tr><th>verdict</th>")
	for _, r := range runs {
		v := VerdictOf(&r.Result)
		word := "FAIL"
		if v.Pass {
			word = "PASS"
		}
		fmt.Fprintf(&b, `<td data-verdict="%s" title="%s">%s</td>`, word, html.EscapeString(v.Headline(&r.Result)), word)
	}
	b.WriteString("</tr>")
	base := &runs[0].Result
	for _, m := range compareMetrics {
		fmt.Fprintf(&b, `<tr data-metric="%s"><th>%s</th>`, html.EscapeString(m.name), html.EscapeString(m.name))
		for i, r := range runs {
			cell := valueCell(m, &r.Result)
			if i > 0 && cell != "-" {
				cell += " (" + ratioCell(m, base, &r.Result) + ")"
			}
			fmt.Fprintf(&b, `<td class="n">%s</td>`, html.EscapeString(cell))
		}
		b.WriteString("</tr>")
	}
	for _, row := range []struct {
		name string
		f    func(r *Result) string
	}{
		{"workload", func(r *Result) string { return spreadCell(r.Spread, true) }},
		{"target msg/s", func(r *Result) string { return fmt.Sprintf("%.0f", r.TargetRate) }},
		{"errors", func(r *Result) string { return fmt.Sprint(r.Errors) }},
		{"error mix", func(r *Result) string { return orDash(FormatErrorMix(r.ErrorMix)) }},
		{"retries", func(r *Result) string { return fmt.Sprint(r.Retries) }},
		{"send delay p99 ms", func(r *Result) string { return fmt.Sprintf("%.3f", r.SendDelayMs.P99) }},
		{"generator saturated", func(r *Result) string { return fmt.Sprint(r.GeneratorSaturated) }},
	} {
		fmt.Fprintf(&b, "<tr><th>%s</th>", html.EscapeString(row.name))
		for _, r := range runs {
			fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(row.f(&r.Result)))
		}
		b.WriteString("</tr>")
	}
	envs := make([][]envField, len(runs))
	for i, r := range runs {
		envs[i] = environmentFields(r.Result.Environment)
	}
	for k := range envs[0] {
		fmt.Fprintf(&b, `<tr data-field="%s"><th>%s</th>`, envs[0][k].Key, html.EscapeString(envs[0][k].Name))
		for i := range runs {
			fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(envs[i][k].Value))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
	if len(runs) > 1 {
		fmt.Fprintf(&b, "<p>Ratios in brackets are to %s: under x1.00 is lower latency or CPU, over x1.00 a higher rate.</p>", html.EscapeString(names[0]))
	}
	c := chart{Title: "Ack latency by percentile", XLabel: "percentile", YLabel: "ms", XTicks: percentileTicks()}
	for i, r := range runs {
		c.Lines = append(c.Lines, percentileLine(names[i], MergeAll(r.Ack)))
		if c.TargetY == 0 {
			c.TargetY = r.Result.SLA.TargetP99Ms
		}
	}
	b.WriteString(c.figure("compare-percentiles"))
	pageEnd(&b)
	return b.Bytes()
}
