package results

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// A partition sweep (ringlog bench --partitions 8,64,256,1024) runs the
// same rate on a fresh topic per partition count; its result directory
// holds result.json with one SweepRow per count, report.html with the
// table and the charts, and a full result directory per count.

// WriteSweep prints the sweep table.
func WriteSweep(w io.Writer, rows []SweepRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "partitions\tworkload\twritten\ttarget msg/s\tachieved\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\tCPU-s/GB\tCPU-µs/msg\tctx sw/msg\tCPU used\tsaturated\tpass\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%s\t%s\t%s\t%s\t%v\t%v\t\n",
			r.Partitions, spreadCell(r.Spread, false), writtenCell(r.Spread), r.TargetRate, r.AchievedRate,
			r.AckLatencyMs.P50, r.AckLatencyMs.P99, r.AckLatencyMs.P999, r.AckLatencyMs.Max,
			r.Errors, cpuCell(r.BrokerCPU), cpuUsPerMsgCell(r.BrokerCPU), switchesPerMsgCell(r.BrokerCPU),
			machineCell(r.BrokerCPU, r.GeneratorCPU), r.Saturated, r.Pass)
	}
	tw.Flush()
}

func spreadCell(p *PartitionSpread, long bool) string {
	switch {
	case p == nil:
		return "-"
	case p.Mode == SpreadSticky:
		return "sticky (null keys)"
	case long:
		return p.Label()
	}
	return "keyed"
}

// writtenCell is "written/partitions, max/min share".
func writtenCell(p *PartitionSpread) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", p.Written, p.TopicPartitions)
}

func cpuCell(c *BrokerCPU) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", c.PerGB)
}

func writeSweepSummary(w io.Writer, r *Result) {
	label := RunName(r, "")
	workload := "keyed over all partitions"
	if r.Workload["keys"] == "0" {
		workload = "sticky (null keys)"
	}
	fmt.Fprintf(w, "partition sweep %s: %s, %.0f msg/s of %d bytes, %s measured after %s warmup per count, started %s\n",
		label, workload, r.TargetRate, r.MessageSize, r.Workload["duration"], r.Workload["warmup"], r.StartedAt.Format("2006-01-02 15:04:05"))
	WriteSweep(w, r.Sweep)
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the sweep stopped early; the last row covers the time measured before the signal")
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	var pass, fail []string
	for _, row := range r.Sweep {
		if row.Pass {
			pass = append(pass, fmt.Sprint(row.Partitions))
		} else {
			fail = append(fail, fmt.Sprint(row.Partitions))
		}
	}
	fmt.Fprintf(w, "SLA (ack p99 <= %.3f ms, no errors): pass at %s; fail at %s\n",
		r.SLA.TargetP99Ms, countList(pass), countList(fail))
	if n := contentionNote(r); n != "" {
		fmt.Fprintln(w, n)
	}
}

func countList(s []string) string {
	if len(s) == 0 {
		return "no partition count"
	}
	return strings.Join(s, ", ") + " partitions"
}

// renderSweepPage is report.html of a sweep (in dir): the table, ack latency by
// partition count (log x) and broker CPU per GB by partition count.
func renderSweepPage(res *Result, dir string) []byte {
	var b bytes.Buffer
	pageStart(&b, "ringlog partition sweep", RunName(res, dir), res)
	workload := "keyed over all partitions"
	if res.Workload["keys"] == "0" {
		workload = "sticky (null keys)"
	}
	var pass, fail []string
	for _, row := range res.Sweep {
		if row.Pass {
			pass = append(pass, fmt.Sprint(row.Partitions))
		} else {
			fail = append(fail, fmt.Sprint(row.Partitions))
		}
	}
	fmt.Fprintf(&b, `<div id="summary"><p>%s, %s msg/s of %d-byte messages, %s measured after %s warm-up per partition count, on a fresh topic each.</p>`+
		`<p>Ack p99 within %s ms and no errors: pass at %s; fail at %s.</p>`,
		html.EscapeString(workload), groupDigits(res.TargetRate), res.MessageSize, html.EscapeString(orUnknown(res.Workload["duration"])),
		html.EscapeString(orUnknown(res.Workload["warmup"])), trimFloat(res.SLA.TargetP99Ms, 3), countList(pass), countList(fail))
	var notes []string
	if res.Interrupted {
		notes = append(notes, "INTERRUPTED: the sweep stopped early; the last row covers the time measured before the signal")
	}
	for _, w := range res.Warnings {
		notes = append(notes, "WARNING: "+w)
	}
	if len(notes) > 0 {
		b.WriteString(`<ul id="notes">`)
		for _, n := range notes {
			fmt.Fprintf(&b, "<li>%s</li>", html.EscapeString(n))
		}
		b.WriteString("</ul>")
	}
	b.WriteString("</div>")
	writeEnvironmentHTML(&b, res.Environment, true)
	b.WriteString(`<table id="sweep" border="1" cellspacing="0" cellpadding="3"><tr><th>partitions</th><th>workload</th><th>partitions written</th><th>share min / max</th>` +
		`<th>achieved msg/s</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>errors</th><th>broker CPU-s/GB</th>` +
		`<th>broker CPU-µs/msg</th><th>broker ctx switches/msg</th><th>machine CPU used (brokers + generator)</th><th>run</th></tr>`)
	for _, r := range res.Sweep {
		share := "-"
		if r.Spread != nil {
			share = fmt.Sprintf("%.2f%% / %.2f%%", 100*r.Spread.MinShare, 100*r.Spread.MaxShare)
		}
		link := html.EscapeString(filepath.ToSlash(filepath.Join(r.Dir, HTMLFile)))
		fmt.Fprintf(&b, `<tr><td align="right">%d</td><td>%s</td><td align="right">%s</td><td align="right">%s</td><td align="right">%.0f</td>`+
			`<td align="right">%.3f</td><td align="right">%.3f</td><td align="right">%.3f</td><td align="right">%.3f</td><td align="right">%d</td><td align="right">%s</td>`+
			`<td align="right">%s</td><td align="right">%s</td><td align="right">%s</td><td><a href="%s">%s</a></td></tr>`,
			r.Partitions, html.EscapeString(spreadCell(r.Spread, true)), writtenCell(r.Spread), share, r.AchievedRate,
			r.AckLatencyMs.P50, r.AckLatencyMs.P99, r.AckLatencyMs.P999, r.AckLatencyMs.Max, r.Errors, cpuCell(r.BrokerCPU),
			cpuUsPerMsgCell(r.BrokerCPU), switchesPerMsgCell(r.BrokerCPU), machineCell(r.BrokerCPU, r.GeneratorCPU), link, html.EscapeString(r.Dir))
	}
	b.WriteString("</table>")
	var ticks []tick
	p50, p99, p999 := line{Name: "p50"}, line{Name: "p99"}, line{Name: "p99.9"}
	cpu := line{Name: "broker CPU-s per GB acknowledged"}
	switches := line{Name: "broker context switches per message acknowledged"}
	micros := line{Name: "broker CPU-µs per message acknowledged"}
	for _, r := range res.Sweep {
		x := math.Log10(float64(max(r.Partitions, 1)))
		ticks = append(ticks, tick{x, fmt.Sprint(r.Partitions)})
		p50.Points = append(p50.Points, point{x, r.AckLatencyMs.P50})
		p99.Points = append(p99.Points, point{x, r.AckLatencyMs.P99})
		p999.Points = append(p999.Points, point{x, r.AckLatencyMs.P999})
		if c := r.BrokerCPU; c != nil {
			cpu.Points = append(cpu.Points, point{x, c.PerGB})
			if c.MessagesAcked > 0 {
				micros.Points = append(micros.Points, point{x, c.CPUMicrosPerMsg})
				if c.CtxSwitches != nil {
					switches.Points = append(switches.Points, point{x, c.CtxSwitches.PerMsg})
				}
			}
		}
	}
	// p99 against partitions with the target line is the sweep's answer;
	// p50 and p99.9 show the shape around it.
	lat := chart{Title: "Ack latency by partition count", XLabel: "partitions (log scale)", YLabel: "ms",
		TargetY: res.SLA.TargetP99Ms, XTicks: ticks, Lines: []line{p99, p50, p999}}
	b.WriteString(lat.figure("p99-vs-partitions"))
	if len(cpu.Points) > 0 {
		c := chart{Title: "Broker CPU per GB by partition count", XLabel: "partitions (log scale)", YLabel: "CPU-s/GB",
			XTicks: ticks, Lines: []line{cpu}}
		b.WriteString(c.figure("cpu-vs-partitions"))
	}
	if len(micros.Points) > 0 {
		c := chart{Title: "Broker cost per acknowledged message by partition count", XLabel: "partitions (log scale)", YLabel: "per message",
			XTicks: ticks, Lines: []line{micros}}
		if len(switches.Points) > 0 {
			c.Lines = append(c.Lines, switches)
		}
		b.WriteString(c.figure("cost-per-msg-vs-partitions"))
	}
	pageEnd(&b)
	return b.Bytes()
}

// WriteSweepDir stores a sweep's result.json and report.html in dir (the
// per-count runs are written by the caller, into the rows' Dirs).
func WriteSweepDir(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteJSON(dir, res); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, HTMLFile), renderSweepPage(res, dir), 0o644)
}
