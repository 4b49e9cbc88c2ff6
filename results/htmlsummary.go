package results

import (
	"bytes"
	"fmt"
	"html"
	"path/filepath"
	"strconv"
	"strings"
)

// The top of report.html: a title block that says what was measured
// (the run's name, topic, partitions, brokers, client), and the summary as
// tables: rate and counts, latency percentiles, broker cost.

// RunName is what reports call a run: its label; else the workload
// file's name; else the name of its result directory (dir); else
// "unlabelled run". Never empty.
func RunName(r *Result, dir string) string {
	if l := strings.TrimSpace(r.Label); l != "" {
		return l
	}
	if n := strings.TrimSpace(r.Workload["omb.name"]); n != "" {
		return n
	}
	if f := r.Workload["workload_file"]; f != "" {
		return strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
	}
	if d := dirName(dir); d != "" {
		return d
	}
	return "unlabelled run"
}

// dirName is the last element of dir ("bench-results/run1": "run1"), of
// its absolute path for "." and the like; "" for no directory.
func dirName(dir string) string {
	if dir == "" {
		return ""
	}
	d := filepath.Clean(dir)
	if b := filepath.Base(d); b != "." && b != ".." && b != string(filepath.Separator) {
		return b
	}
	if abs, err := filepath.Abs(d); err == nil {
		if b := filepath.Base(abs); b != string(filepath.Separator) {
			return b
		}
	}
	return d
}

// runFact is one item of the title block.
type runFact struct {
	Key, Name, Value string
}

// runFacts is what the run was measured on, for the title block: topic,
// partitions, brokers and client first, then acks, replication and the
// message size. Values nobody recorded read "unknown". Older result.json
// files have the same fields: the workload map has carried the topic,
// the cluster's broker count and the client since they were written.
func runFacts(r *Result) []runFact {
	w, e := r.Workload, r.Environment
	num := func(n int) string {
		if n <= 0 {
			return "unknown"
		}
		return strconv.Itoa(n)
	}
	partitions := num(e.Partitions)
	if partitions == "unknown" && w["partitions"] != "" && w["partitions"] != "0" {
		partitions = w["partitions"]
	}
	if len(r.Sweep) > 0 {
		counts := make([]string, len(r.Sweep))
		for i, row := range r.Sweep {
			counts[i] = strconv.Itoa(row.Partitions)
		}
		partitions = strings.Join(counts, ", ") + " (one run each)"
	}
	brokers := orUnknown(w["cluster_brokers"])
	client := e.Client
	if client == "" {
		client = w["client"]
	}
	client = orUnknown(client)
	if e.ClientHosts > 1 {
		client += fmt.Sprintf(" on %d hosts", e.ClientHosts)
	}
	rf := num(e.ReplicationFactor)
	if e.MinISR > 0 {
		rf += fmt.Sprintf(", min ISR %d", e.MinISR)
	}
	acks := e.Acks
	if acks == "" {
		acks = w["acks"]
	}
	size := "unknown"
	if r.MessageSize > 0 {
		size = groupDigits(float64(r.MessageSize)) + " bytes"
	}
	return []runFact{
		{"topic", "topic", orUnknown(w["topic"])},
		{"partitions", "partitions", partitions},
		{"brokers", "brokers", brokers},
		{"client", "client", client},
		{"acks", "acks", orUnknown(acks)},
		{"replication", "replication factor", rf},
		{"message_size", "message size", size},
	}
}

// writeTitleBlock is the page's heading: kind of report, the run's name,
// and the facts that say what was measured.
func writeTitleBlock(b *bytes.Buffer, kind, name string, r *Result) {
	fmt.Fprintf(b, `<header id="title-block"><p class="kicker">%s</p><h1 id="run-name">%s</h1><dl id="run-facts">`,
		html.EscapeString(kind), html.EscapeString(name))
	for _, f := range runFacts(r) {
		fmt.Fprintf(b, `<div data-fact="%s"><dt>%s</dt><dd>%s</dd></div>`, f.Key, html.EscapeString(f.Name), html.EscapeString(f.Value))
	}
	b.WriteString("</dl>")
	if !r.StartedAt.IsZero() {
		fmt.Fprintf(b, `<p id="run-window">Started %s; %s s measured after %s s warm-up.</p>`,
			html.EscapeString(r.StartedAt.Format("2006-01-02 15:04:05 -07:00")), trimFloat(r.DurationS, 1), trimFloat(r.WarmupS, 1))
	}
	if p := r.Spread; p != nil {
		// Null-key runs measure the friendliest workload: say so up front.
		fmt.Fprintf(b, "<p id=\"workload\"><b>Workload: %s</b> (%s)</p>", html.EscapeString(p.Label()), html.EscapeString(p.Detail()))
	}
	b.WriteString("</header>")
}

// writeSummaryHTML is the run's numbers as tables side by side: rate,
// counts, errors and cost (#summary), the latency percentiles (#latency)
// and the environment.
func writeSummaryHTML(b *bytes.Buffer, r *Result) {
	b.WriteString(`<h2>Summary</h2><div class="tables">`)
	b.WriteString(`<table id="summary"><tr><th colspan="2" class="head">rate and counts</th></tr>`)
	row := func(key, name, value string, class string) {
		if class != "" {
			class = ` class="` + class + `"`
		}
		fmt.Fprintf(b, `<tr data-row="%s"><th>%s</th><td%s>%s</td></tr>`, key, html.EscapeString(name), class, html.EscapeString(value))
	}
	target := "none (as fast as possible)"
	if r.TargetRate > 0 {
		target = groupDigits(r.TargetRate) + " msg/s"
	}
	row("target_rate", "target rate", target, "")
	achieved := groupDigits(r.AchievedRate) + " msg/s"
	if r.TargetRate > 0 {
		achieved += fmt.Sprintf(" (%.1f%% of target)", 100*r.AchievedRate/r.TargetRate)
	}
	row("achieved_rate", "achieved rate", achieved, "")
	row("throughput", "throughput", fmt.Sprintf("%.2f MB/s", r.ThroughputMBps), "")
	row("sent", "messages sent", groupDigits(float64(r.MessagesSent)), "")
	row("acked", "messages acknowledged", groupDigits(float64(r.MessagesAcked)), "")
	if r.MessagesConsumed > 0 {
		row("consumed", "messages consumed", groupDigits(float64(r.MessagesConsumed)), "")
	}
	errClass := ""
	if r.Errors > 0 {
		errClass = "bad"
	}
	row("errors", "errors (messages failed)", groupDigits(float64(r.Errors)), errClass)
	if r.Retries > 0 || r.MessagesRetried > 0 {
		row("retries", "retries", fmt.Sprintf("%d requests, %d messages re-sent", r.Retries, r.MessagesRetried), "")
	}
	if len(r.ErrorMix) > 0 {
		row("error_mix", "error mix", FormatErrorMix(r.ErrorMix), "")
	}
	if r.FirstError != "" {
		row("first_error", "first error", r.FirstError, "")
	}
	if bd := r.Backlog; bd != nil {
		what, detail := bd.Summary()
		row("backlog", "backlog", what+"; "+detail, "")
	}
	if c := r.BrokerCPU; c != nil {
		cores := ""
		if c.WindowS > 0 {
			cores = fmt.Sprintf("%.2f cores: ", c.Seconds/c.WindowS)
		}
		row("broker_cpu", "broker CPU", fmt.Sprintf("%s%.2f CPU-s over %.1f s, %d broker process(es); %.1f CPU-s/GB", cores, c.Seconds, c.WindowS, c.Processes, c.PerGB), "")
		if c.MessagesAcked > 0 {
			row("cpu_us_per_msg", "broker CPU-µs per acked msg", fmt.Sprintf("%.1f", c.CPUMicrosPerMsg), "")
			if sw := c.CtxSwitches; sw != nil {
				row("ctx_switches_per_msg", "broker context switches per acked msg", fmt.Sprintf("%.2f (%.2f voluntary, %.2f involuntary)",
					sw.PerMsg, perMsg(float64(sw.Voluntary), c.MessagesAcked), perMsg(float64(sw.Involuntary), c.MessagesAcked)), "")
			}
		}
	}
	if g := r.GeneratorCPU; g != nil && g.WindowS > 0 {
		cores := fmt.Sprintf("%.2f cores", g.Seconds/g.WindowS)
		if g.Cores > 0 {
			cores += fmt.Sprintf(" of %d", g.Cores)
		}
		what := fmt.Sprintf("%s (%.2f CPU-s over %.1f s", cores, g.Seconds, g.WindowS)
		if g.Processes > 1 {
			what += fmt.Sprintf(", %d generators", g.Processes)
		}
		row("generator_cpu", "generator CPU", what+")", "")
		if g.MachineBusyCores > 0 {
			row("machine_cpu", "machine CPU", fmt.Sprintf("%.2f cores busy of %d (every process and the kernel's own threads)", g.MachineBusyCores, g.Cores), "")
		}
	}
	b.WriteString("</table>")

	fmt.Fprintf(b, `<table id="latency"><tr><th class="head">latency (ms)</th><th class="q">p50</th><th class="q">p90</th><th class="q">p99</th><th class="q">p99.9</th><th class="q">max</th></tr>`)
	lat := func(key, name string, p Percentiles, target float64) {
		fmt.Fprintf(b, `<tr data-latency="%s"><th>%s</th>`, key, html.EscapeString(name))
		for i, v := range []float64{p.P50, p.P90, p.P99, p.P999, p.Max} {
			class := "n"
			if i == 2 && target > 0 && v > target {
				class += " bad" // the p99 the verdict is about, over its target
			}
			fmt.Fprintf(b, `<td class="%s">%.3f</td>`, class, v)
		}
		b.WriteString("</tr>")
	}
	lat("ack", "ack", r.AckLatencyMs, r.SLA.TargetP99Ms)
	if r.E2ELatencyMs != nil {
		lat("e2e", "end-to-end", *r.E2ELatencyMs, 0)
	}
	lat("send_delay", "send delay", r.SendDelayMs, 0)
	fmt.Fprintf(b, `<tr><td colspan="6" class="note">Target: ack p99 within %s ms. Ack: from the time a message was due to be sent to its acknowledgement; end-to-end: to its consumption; send delay: how late the generator handed it to the client.</td></tr>`,
		trimFloat(r.SLA.TargetP99Ms, 3))
	b.WriteString("</table>")
	// What the numbers were measured against, beside them.
	writeEnvironmentTable(b, r.Environment, false, true)
	b.WriteString("</div>")

	var notes []string
	if r.Interrupted {
		planned := r.Workload["duration"]
		if planned == "" {
			planned = "?"
		}
		notes = append(notes, fmt.Sprintf("INTERRUPTED: %.1f s of the planned %s measured; rates are over the time measured", r.DurationS, planned))
	}
	for _, w := range r.Warnings {
		notes = append(notes, "WARNING: "+w)
	}
	if len(notes) > 0 {
		b.WriteString(`<ul id="notes">`)
		for _, n := range notes {
			fmt.Fprintf(b, "<li>%s</li>", html.EscapeString(n))
		}
		b.WriteString("</ul>")
	}
}

// writeStepsHTML is the find-max step table.
func writeStepsHTML(b *bytes.Buffer, fm *FindMax) {
	cpu := false
	for _, s := range fm.Steps {
		cpu = cpu || s.CPUPerGB > 0
	}
	fmt.Fprintf(b, `<h2>Find-max steps</h2><p>Highest rate with ack p99 within %s ms and no errors: <strong>%s msg/s</strong>.</p><table id="find-max"><tr><th>step</th><th>target msg/s</th><th>achieved msg/s</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th><th>errors</th><th>saturated</th><th>pass</th>`,
		trimFloat(fm.TargetP99Ms, 3), groupDigits(fm.MaxPassingRate))
	if cpu {
		b.WriteString(`<th>broker CPU-s/GB</th><th>broker CPU-µs/msg</th><th>broker ctx switches/msg</th>`)
	}
	b.WriteString("</tr>")
	yes := func(v bool) string {
		if v {
			return "yes"
		}
		return "no"
	}
	for i, s := range fm.Steps {
		fmt.Fprintf(b, `<tr><td class="n">%d</td><td class="n">%s</td><td class="n">%s</td><td class="n">%.3f</td><td class="n">%.3f</td><td class="n">%.3f</td><td class="n">%d</td><td>%s</td><td>%s</td>`,
			i+1, groupDigits(s.TargetRate), groupDigits(s.AchievedRate), s.P50Ms, s.P99Ms, s.MaxMs, s.Errors, yes(s.Saturated), yes(s.Pass))
		if cpu {
			fmt.Fprintf(b, `<td class="n">%.1f</td><td class="n">%.1f</td><td class="n">%.2f</td>`, s.CPUPerGB, s.CPUMicrosPerMsg, s.CtxSwitchesPerMsg)
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
}

// groupDigits writes v rounded to a whole number with thousands
// separators: 20000 -> "20,000".
func groupDigits(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg && s != "0" {
		return "-" + string(out)
	}
	return string(out)
}

// trimFloat writes v with at most prec decimals and no trailing zeros.
func trimFloat(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
