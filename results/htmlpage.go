package results

import (
	"bytes"
	"fmt"
	"html"
)

// The frame every report page shares: a stylesheet that wraps rather
// than clips (long summary lines, error messages and host names used to
// run off the page), the verdict, the environment table and a small
// layout self-check that a headless browser can read back.

const htmlHead = `<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>%s</title>
<style>
*{box-sizing:border-box}
body{font-family:sans-serif;margin:16px auto;padding:0 16px;max-width:1600px;line-height:1.35;color:#222}
h1{font-size:24px;margin:2px 0 8px;overflow-wrap:anywhere}h2{font-size:17px;margin-top:24px}
.kicker{margin:0;color:#666;font-size:13px;text-transform:uppercase;letter-spacing:.05em}
#title-block{border-bottom:1px solid #ddd;padding-bottom:8px;margin-bottom:12px}
#run-facts{display:flex;flex-wrap:wrap;gap:6px 28px;margin:6px 0}
#run-facts div{min-width:0}
#run-facts dt{font-size:12px;color:#666}
#run-facts dd{margin:0;font-size:16px;font-weight:bold;overflow-wrap:anywhere}
#run-window,#workload{margin:6px 0;font-size:14px}
pre{background:#f6f6f6;padding:8px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:8px 0;font-size:13px;max-width:100%%}
th,td{border:1px solid #ccc;padding:3px 6px;overflow-wrap:anywhere;vertical-align:top}
th{text-align:left;background:#f3f3f3;font-weight:normal;overflow-wrap:normal}
th.head{font-weight:bold}th.q{text-align:right;font-weight:bold}
td.id{overflow-wrap:normal}
@media (max-width:900px){th,td.id{overflow-wrap:anywhere}}
td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.bad{color:#b00;font-weight:bold}
td.note{font-size:12px;color:#555;white-space:normal}
.tables{display:flex;flex-wrap:wrap;gap:0 24px;align-items:flex-start}
.tables table{flex:0 1 auto}
#summary{max-width:460px}#latency{max-width:480px}#environment{max-width:440px}
#notes{color:#b00}
figure.chart{margin:12px 0;width:100%%}
figure.chart svg{width:100%%;height:auto;display:block}
figure.chart figcaption{font-size:12px;color:#555;margin-left:5.5%%}
#verdict{padding:10px 14px;border-radius:4px;font-size:18px;font-weight:bold;overflow-wrap:anywhere}
#verdict.pass{background:#e3f5e1;border:2px solid #2ca02c}
#verdict.fail{background:#fde4e4;border:2px solid #d62728}
#verdict ul{font-size:14px;font-weight:normal;margin:6px 0 0}
.missing{color:#b00;font-weight:bold}
</style></head><body>`

// layoutScript records, once the page has laid out, each chart's box
// (document coordinates, CSS px) in body[data-charts] and every element
// whose content is wider than its box in body[data-clipped] ("page" when
// the page scrolls sideways). Reports stay self-contained: it loads
// nothing and changes nothing visible.
const layoutScript = `<script>
window.addEventListener('load', function () {
  var charts = [], clipped = [];
  document.querySelectorAll('figure.chart').forEach(function (f) {
    var r = f.getBoundingClientRect();
    charts.push({id: f.dataset.chart, x: Math.round(r.left + scrollX), y: Math.round(r.top + scrollY), w: Math.round(r.width), h: Math.round(r.height)});
  });
  document.querySelectorAll('body *').forEach(function (e) {
    if (e instanceof HTMLElement && e.tagName !== 'SCRIPT' && e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) {
      clipped.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : ''));
    }
  });
  var d = document.documentElement;
  if (d.scrollWidth > d.clientWidth + 1) clipped.push('page');
  document.body.setAttribute('data-charts', JSON.stringify(charts));
  document.body.setAttribute('data-clipped', JSON.stringify(clipped));
  document.body.setAttribute('data-layout-checked', 'true');
});
</script>`

// pageStart writes the head, the title block (kind of report, name, and
// for one run what it measured) and the verdict.
func pageStart(b *bytes.Buffer, kind, name string, res *Result) {
	fmt.Fprintf(b, htmlHead, html.EscapeString(name+" · "+kind))
	if res == nil {
		fmt.Fprintf(b, `<header id="title-block"><p class="kicker">%s</p><h1 id="run-name">%s</h1></header>`,
			html.EscapeString(kind), html.EscapeString(name))
		return
	}
	writeTitleBlock(b, kind, name, res)
	writeVerdictHTML(b, res)
}

// pageEnd closes the page after the layout self-check.
func pageEnd(b *bytes.Buffer) {
	b.WriteString(layoutScript)
	b.WriteString("</body></html>\n")
}

func writeVerdictHTML(b *bytes.Buffer, res *Result) {
	v := VerdictOf(res)
	class, word := "fail", "FAIL"
	if v.Pass {
		class, word = "pass", "PASS"
	}
	fmt.Fprintf(b, `<div id="verdict" class="%s" data-verdict="%s">%s`, class, word, word)
	if v.Pass {
		fmt.Fprintf(b, ": ack p99 %.3f ms within the target %.3f ms, no errors", res.AckLatencyMs.P99, res.SLA.TargetP99Ms)
		if len(res.Sweep) > 0 {
			fmt.Fprintf(b, ": every partition count within ack p99 %.3f ms, no errors", res.SLA.TargetP99Ms)
		}
	} else {
		b.WriteString("<ul>")
		for _, why := range v.Reasons {
			fmt.Fprintf(b, "<li>%s</li>", html.EscapeString(why))
		}
		b.WriteString("</ul>")
	}
	if v.Note != "" {
		fmt.Fprintf(b, `<p id="contention">%s</p>`, html.EscapeString(v.Note))
	}
	b.WriteString("</div>")
}

// writeBrokerCountersHTML is the cost per acknowledged message, one row
// per broker and the sum, with the context switches by thread name.
func writeBrokerCountersHTML(b *bytes.Buffer, res *Result) {
	c := res.BrokerCPU
	if c == nil || c.MessagesAcked <= 0 {
		return
	}
	fmt.Fprintf(b, `<h2>Broker cost per acknowledged message</h2><p>Over the %.1f s window, %s messages acknowledged; everything the broker did in the window counts.</p>`,
		c.WindowS, groupDigits(float64(c.MessagesAcked)))
	b.WriteString(`<table id="broker-counters"><tr><th>broker</th><th>CPU-s</th><th>CPU-µs/msg</th><th>ctx switches/msg</th><th>voluntary/msg</th><th>involuntary/msg</th><th>switches/msg by thread</th><th>threads</th></tr>`)
	row := func(key, name string, secs, us float64, sw *CtxSwitches) {
		fmt.Fprintf(b, `<tr data-broker="%s"><td class="id">%s</td><td class="n">%.2f</td><td class="n">%.1f</td>`,
			html.EscapeString(key), html.EscapeString(name), secs, us)
		if sw == nil {
			b.WriteString(`<td class="n">-</td><td class="n">-</td><td class="n">-</td><td></td><td></td></tr>`)
			return
		}
		threads := fmt.Sprintf("%d started, %d exited", sw.ThreadsStarted, sw.ThreadsExited)
		if n := exitedNote(sw); n != "" {
			threads = fmt.Sprintf("%d started; %s", sw.ThreadsStarted, n)
		}
		fmt.Fprintf(b, `<td class="n">%.2f</td><td class="n">%.2f</td><td class="n">%.2f</td><td>%s</td><td>%s</td></tr>`,
			sw.PerMsg, perMsg(float64(sw.Voluntary), c.MessagesAcked), perMsg(float64(sw.Involuntary), c.MessagesAcked),
			html.EscapeString(threadsCell(sw, c.MessagesAcked, 8)), html.EscapeString(threads))
	}
	for _, p := range c.Brokers {
		row(fmt.Sprint(p.PID), p.Label(), p.Seconds, p.CPUMicrosPerMsg, p.CtxSwitches)
	}
	if len(c.Brokers) != 1 {
		row("sum", "all brokers", c.Seconds, c.CPUMicrosPerMsg, c.CtxSwitches)
	}
	b.WriteString("</table>")
}

// writeEnvironmentHTML is the environment table: what the numbers were
// measured against. Each row carries its field key for tests and scripts.
func writeEnvironmentHTML(b *bytes.Buffer, e Environment, sweep bool) {
	b.WriteString(`<h2>Environment</h2>`)
	writeEnvironmentTable(b, e, sweep, false)
}

// writeEnvironmentTable is the environment table alone, with a heading
// row when it stands beside the summary's tables.
func writeEnvironmentTable(b *bytes.Buffer, e Environment, sweep, head bool) {
	b.WriteString(`<table id="environment">`)
	if head {
		b.WriteString(`<tr><th colspan="2" class="head">environment</th></tr>`)
	}
	for _, f := range environmentFields(e) {
		if sweep && f.Key == "partitions" {
			f.Value = "one row per count, below" // the environment is the first row's
		}
		fmt.Fprintf(b, `<tr data-field="%s"><th>%s</th><td>%s</td></tr>`, f.Key, html.EscapeString(f.Name), html.EscapeString(f.Value))
	}
	b.WriteString("</table>")
}

// writeAgentsHTML is the per-agent breakdown of a distributed run.
func writeAgentsHTML(b *bytes.Buffer, agents []AgentResult) {
	if len(agents) == 0 {
		return
	}
	b.WriteString(`<h2>Agents</h2><table id="agents"><tr><th>agent</th><th>host</th><th>cores</th><th>target msg/s</th><th>achieved msg/s</th>` +
		`<th>sent</th><th>acked</th><th>errors</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th><th>saturated</th><th>status</th></tr>`)
	for _, a := range agents {
		sat := "no"
		if a.Saturated {
			sat = "yes: " + orUnknown(a.SaturationReason)
		}
		status := `ok`
		if a.Missing {
			status = `<span class="missing">MISSING</span>: ` + html.EscapeString(orUnknown(a.MissingReason))
		}
		fmt.Fprintf(b, `<tr data-agent="%s"><td class="id">%s</td><td>%s</td><td class="n">%d</td><td class="n">%.0f</td><td class="n">%.0f</td>`+
			`<td class="n">%d</td><td class="n">%d</td><td class="n">%d</td><td class="n">%.3f</td><td class="n">%.3f</td><td class="n">%.3f</td><td>%s</td><td>%s</td></tr>`,
			html.EscapeString(a.Name), html.EscapeString(a.Name), html.EscapeString(orDash(a.Hostname)), a.Cores, a.TargetRate, a.AchievedRate,
			a.MessagesSent, a.MessagesAcked, a.Errors, a.AckLatencyMs.P50, a.AckLatencyMs.P99, a.AckLatencyMs.Max, html.EscapeString(sat), status)
	}
	b.WriteString("</table>")
}

// figure wraps a chart so the page can size it and the layout check can
// find it by id.
func (c chart) figure(id string) string {
	caption := ""
	if c.Caption != "" {
		caption = "<figcaption>" + html.EscapeString(c.Caption) + "</figcaption>"
	}
	return fmt.Sprintf(`<figure class="chart" id="chart-%s" data-chart="%s">%s%s</figure>`, id, id, c.svg(), caption)
}
