package results

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"path/filepath"
	"sort"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// point and line are chart data in chart units (x already transformed).
type point struct{ X, Y float64 }

type line struct {
	Name   string
	Color  string
	Points []point
}

type chart struct {
	Title, XLabel, YLabel string
	Lines                 []line
	// TargetY draws a dashed horizontal target line when > 0.
	TargetY float64
	// XTicks maps chart x values to labels; nil means linear ticks.
	XTicks []tick
	// Caption is a line under the chart (what it leaves out).
	Caption string
}

type tick struct {
	X     float64
	Label string
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// A chart is drawn in a 1300 x 400 box that the page scales to its own
// width (figure.chart is as wide as the page), so a wide window gets wide
// charts instead of a fixed size with half the page empty.
const (
	chartW, chartH               = 1300, 400
	padL, padR, padTop, padBelow = 72, 40, 40, 50 // padR: room for the last x label
	yTicks, xTicks               = 5, 12          // about this many intervals on each axis
)

// svg renders a self-contained inline SVG line chart. The y axis starts
// at 0 and ends on a round tick; linear x ticks fall on round values.
func (c chart) svg() string {
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), c.TargetY
	for _, l := range c.Lines {
		for _, p := range l.Points {
			minX = math.Min(minX, p.X)
			maxX = math.Max(maxX, p.X)
			maxY = math.Max(maxY, p.Y)
		}
	}
	if math.IsInf(minX, 1) {
		minX, maxX = 0, 1
	}
	if maxX <= minX {
		maxX = minX + 1
	}
	if maxY <= 0 {
		maxY = 1
	}
	// Headroom above the highest point, up to the next round tick.
	yStep := niceStep(maxY*1.05, yTicks)
	maxY = math.Ceil(maxY*1.05/yStep-1e-9) * yStep
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padTop-padBelow)
	sx := func(x float64) float64 { return padL + (x-minX)/(maxX-minX)*plotW }
	sy := func(y float64) float64 { return padTop + plotH - y/maxY*plotH }

	var b strings.Builder
	// viewBox: the page scales the chart to its width instead of clipping it.
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="13">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`, padL, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`, padL, padTop, plotW, plotH)
	for _, y := range niceTicks(0, maxY, yStep) {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, padL, padL+plotW, sy(y), sy(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" class="ytick">%s</text>`, padL-5, sy(y)+4, tickLabel(y, yStep, maxY))
	}
	ticks := c.XTicks
	if ticks == nil {
		step := niceStep(maxX-minX, xTicks)
		for _, x := range niceTicks(minX, maxX, step) {
			ticks = append(ticks, tick{x, tickLabel(x, step, math.Max(math.Abs(minX), math.Abs(maxX)))})
		}
	}
	for _, t := range ticks {
		if t.X < minX || t.X > maxX {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#eee"/>`, sx(t.X), sx(t.X), padTop, padTop+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" class="xtick">%s</text>`, sx(t.X), padTop+plotH+16, html.EscapeString(t.Label))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, padL+plotW/2, chartH-10, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`, padTop+plotH/2, padTop+plotH/2, html.EscapeString(c.YLabel))
	if c.TargetY > 0 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="6,4"/>`, padL, padL+plotW, sy(c.TargetY), sy(c.TargetY))
		unit := ""
		if c.YLabel == "ms" || c.YLabel == "msg/s" {
			unit = " " + c.YLabel
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">target %s%s</text>`, padL+plotW-4, sy(c.TargetY)-4, fmtNum(c.TargetY), unit)
	}
	// The legend sits above the plot, right-aligned, where it covers no
	// line; when the title leaves no room there, it is a column in the
	// plot's top left corner.
	legendW := func(name string) float64 { return 24 + 7.5*float64(len([]rune(name))) }
	legendX, legendRow := float64(padL)+plotW, true
	for _, l := range c.Lines {
		legendX -= legendW(l.Name)
	}
	if legendX < padL+9.5*float64(len([]rune(c.Title)))+20 {
		legendRow = false
	}
	for i, l := range c.Lines {
		color := l.Color
		if color == "" {
			color = palette[i%len(palette)]
		}
		var pts []string
		for _, p := range l.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(p.X), sy(p.Y)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, color, strings.Join(pts, " "))
		if len(l.Points) <= 40 {
			// Few points (steps, sweep rows, one-point runs): mark each,
			// a single point draws no line.
			for _, p := range l.Points {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, sx(p.X), sy(p.Y), color)
			}
		}
		if legendRow {
			fmt.Fprintf(&b, `<rect x="%.1f" y="14" width="12" height="12" fill="%s"/><text x="%.1f" y="24">%s</text>`,
				legendX, color, legendX+16, html.EscapeString(l.Name))
			legendX += legendW(l.Name)
		} else {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`,
				padL+10, padTop+8+i*17, color, padL+26, padTop+18+i*17, html.EscapeString(l.Name))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case math.Abs(v) >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// percentileLine plots latency (ms) against log10(1/(1-p)), the HdrHistogram
// percentile plot: each decade on x is one more "nine".
func percentileLine(name string, h *hdr.Histogram) line {
	l := line{Name: name}
	for _, b := range h.CumulativeDistributionWithTicks(5) {
		if b.Quantile >= 100 {
			// 1/(1-1) is infinite: place the max one decade past the last point.
			last := 0.0
			if n := len(l.Points); n > 0 {
				last = l.Points[n-1].X
			}
			l.Points = append(l.Points, point{math.Ceil(last + 1e-9), float64(b.ValueAt) / 1000})
			break
		}
		l.Points = append(l.Points, point{math.Log10(1 / (1 - b.Quantile/100)), float64(b.ValueAt) / 1000})
	}
	return l
}

func percentileTicks() []tick {
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%", "99.99999%"}
	ts := make([]tick, len(labels))
	for i, s := range labels {
		ts[i] = tick{float64(i), s}
	}
	return ts
}

// overTime plots one value per interval against seconds since base.
func overTime(name string, baseMs int64, hs []*hdr.Histogram, f func(h *hdr.Histogram) float64) line {
	l := line{Name: name}
	for _, h := range hs {
		l.Points = append(l.Points, point{float64(h.EndTimeMs()-baseMs) / 1000, f(h)})
	}
	return l
}

func quantileMs(q float64) func(h *hdr.Histogram) float64 {
	return func(h *hdr.Histogram) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
}

func ratePerSecond(h *hdr.Histogram) float64 {
	d := float64(h.EndTimeMs()-h.StartTimeMs()) / 1000
	if d <= 0 {
		return 0
	}
	return float64(h.TotalCount()) / d
}

// fullSeconds is the intervals the charts over time plot: hs less the
// leading and trailing ones that are partial, shorter than the usual
// interval (a warm-up that ends mid-second, the cut at the end of the
// run) or reaching past the end of the measured window (windowEndMs, 0:
// unknown), where the schedule has stopped and only the last in-flight
// acknowledgements arrive. Plotted, those read as throughput dropping at
// the start or the end. dropped says how many were left out; when every
// interval is partial, all are kept.
func fullSeconds(hs []*hdr.Histogram, windowEndMs int64) (kept []*hdr.Histogram, dropped int) {
	if len(hs) < 2 {
		return hs, 0
	}
	durs := make([]int64, len(hs))
	for i, h := range hs {
		durs[i] = h.EndTimeMs() - h.StartTimeMs()
	}
	sorted := append([]int64(nil), durs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	nominal := sorted[len(sorted)/2]
	// A few milliseconds either way is the timer, not a partial interval.
	slack := max(nominal/20, 5)
	partial := func(i int) bool {
		return durs[i] < nominal-slack || (windowEndMs > 0 && hs[i].EndTimeMs() > windowEndMs+slack)
	}
	lo, hi := 0, len(hs)
	for lo < hi && partial(lo) {
		lo++
	}
	for hi > lo && partial(hi-1) {
		hi--
	}
	if lo == hi {
		return hs, 0
	}
	return hs[lo:hi], len(hs) - (hi - lo)
}

// windowEndMs is the end of the measured window in Unix ms, 0 when the
// result does not say.
func windowEndMs(res *Result) int64 {
	if res.StartedAt.IsZero() || res.DurationS <= 0 {
		return 0
	}
	return res.StartedAt.UnixMilli() + int64(res.DurationS*1000+0.5)
}

// RenderHTML builds the self-contained report page for one run.
func RenderHTML(r *Run) ([]byte, error) {
	res := &r.Result
	if len(res.Sweep) > 0 {
		return renderSweepPage(res, r.Dir), nil
	}
	var b bytes.Buffer
	pageStart(&b, "ringlog load report", RunName(res, r.Dir), res)
	writeSummaryHTML(&b, res)
	writeBrokerCountersHTML(&b, res)
	writeAgentsHTML(&b, res.Agents)

	b.WriteString("<h2>Charts</h2>")
	pct := chart{Title: "Latency by percentile", XLabel: "percentile", YLabel: "ms",
		TargetY: res.SLA.TargetP99Ms, XTicks: percentileTicks()}
	pct.Lines = append(pct.Lines, percentileLine("ack", MergeAll(r.Ack)))
	if len(r.E2E) > 0 {
		pct.Lines = append(pct.Lines, percentileLine("end-to-end", MergeAll(r.E2E)))
	}
	pct.Lines = append(pct.Lines, percentileLine("send delay", MergeAll(r.SendDelay)))
	b.WriteString(pct.figure("percentiles"))

	// Both charts over time plot whole seconds: a partial interval at
	// either end holds a fraction of a second's acknowledgements (the
	// throughput seems to crash) or only the last few in flight (latency
	// seems to recover). The percentiles above count every one.
	base := r.startUnixMs()
	full, dropped := fullSeconds(r.Ack, windowEndMs(res))
	caption := ""
	if dropped > 0 {
		caption = fmt.Sprintf("Whole seconds only: %d partial interval(s) at the start or the end of the window (the warm-up's last fraction, the last acknowledgements after the schedule stopped) are left out; the percentiles count them.", dropped)
	}
	lat := chart{Title: "Ack latency over time", XLabel: "seconds into the measured window", YLabel: "ms", TargetY: res.SLA.TargetP99Ms, Caption: caption}
	lat.Lines = []line{
		overTime("p50", base, full, quantileMs(50)),
		overTime("p99", base, full, quantileMs(99)),
		overTime("max", base, full, func(h *hdr.Histogram) float64 { return float64(h.Max()) / 1000 }),
	}
	b.WriteString(lat.figure("latency-over-time"))

	thr := chart{Title: "Acknowledged throughput over time", XLabel: "seconds into the measured window", YLabel: "msg/s", Caption: caption}
	thr.Lines = []line{overTime("acked msg/s", base, full, ratePerSecond)}
	if res.TargetRate > 0 {
		thr.TargetY = res.TargetRate
	}
	b.WriteString(thr.figure("throughput-over-time"))

	if len(res.ErrorMix) > 0 {
		fmt.Fprintf(&b, "<h2>Failed produce attempts by cause</h2><p>%d requests retried after a backoff, %d messages re-sent; %d messages failed.</p><table id=\"error-mix\"><tr><th>cause</th><th>attempts</th></tr>",
			res.Retries, res.MessagesRetried, res.Errors)
		for _, name := range errorMixNames(res.ErrorMix) {
			fmt.Fprintf(&b, "<tr><td>%s</td><td align=\"right\">%d</td></tr>", html.EscapeString(name), res.ErrorMix[name])
		}
		b.WriteString("</table>")
	}
	if res.FindMax != nil {
		writeStepsHTML(&b, res.FindMax)
		b.WriteString(findMaxChart(res.FindMax).figure("p99-vs-rate"))
	}
	if ps := res.Profiles; ps != nil {
		b.WriteString("<h2>Broker profiles (measured window)</h2><ul>")
		for _, bp := range ps.Brokers {
			fmt.Fprintf(&b, "<li>broker %d:", bp.NodeID)
			for _, f := range bp.Files {
				fmt.Fprintf(&b, " <a href=\"%s\">%s</a>", html.EscapeString(filepath.ToSlash(f)), html.EscapeString(filepath.Base(f)))
			}
			b.WriteString("</li>")
		}
		fmt.Fprintf(&b, "</ul><pre>%s</pre>", html.EscapeString(profileSummary(r)))
	}
	pageEnd(&b)
	return b.Bytes(), nil
}

func sortedSteps(steps []Step) []Step {
	out := append([]Step(nil), steps...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].TargetRate < out[j-1].TargetRate; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// findMaxChart is p99 against the target rate of each find-max step,
// with the target p99 as the line a passing step stays under.
func findMaxChart(fm *FindMax) chart {
	c := chart{Title: "Find-max steps: ack p99 by target rate", XLabel: "target msg/s", YLabel: "p99 ms", TargetY: fm.TargetP99Ms}
	l := line{Name: "p99"}
	for _, s := range sortedSteps(fm.Steps) {
		l.Points = append(l.Points, point{s.TargetRate, s.P99Ms})
	}
	c.Lines = []line{l}
	return c
}
