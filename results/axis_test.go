package results

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// isRoundStep: step is 1, 2, 2.5 or 5 times a power of ten.
func isRoundStep(step float64) bool {
	mag := math.Pow(10, math.Floor(math.Log10(step)))
	m := step / mag
	for _, want := range []float64{1, 2, 2.5, 5} {
		if math.Abs(m-want) < 1e-9 {
			return true
		}
	}
	return false
}

// TestNiceTicks: steps are 1, 2, 2.5 or 5 x 10^n, ticks are multiples of
// the step with no float noise, and labels carry the axis's unit with
// only the decimals the step needs.
func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		span float64
		n    int
		want float64
	}{
		{3310, 5, 1000}, {2830, 5, 1000}, {10, 5, 2}, {12, 5, 2.5}, {0.3, 5, 0.1}, {0.012, 5, 0.0025},
		{20_000, 5, 5000}, {9, 12, 1}, {60, 12, 5}, {25, 12, 2.5}, {1, 5, 0.2}, {1e6, 5, 200_000}, {0, 5, 1},
	} {
		got := niceStep(c.span, c.n)
		if math.Abs(got-c.want) > 1e-12*c.want || !isRoundStep(got) {
			t.Errorf("niceStep(%v, %d) = %v, want %v", c.span, c.n, got, c.want)
		}
	}
	if got := niceTicks(0.1, 0.7, 0.1); len(got) != 7 || got[2] != 0.3 || got[6] != 0.7 {
		t.Errorf("niceTicks(0.1, 0.7, 0.1) = %v", got)
	}
	if got := niceTicks(1.2, 9.1, 2.5); len(got) != 3 || got[0] != 2.5 || got[2] != 7.5 {
		t.Errorf("niceTicks(1.2, 9.1, 2.5) = %v", got)
	}
	for _, c := range []struct {
		v, step, top float64
		want         string
	}{
		{0, 500, 3000, "0"}, {2500, 2500, 10_000, "2.5k"}, {5000, 2500, 10_000, "5k"}, {102_500, 2500, 110_000, "102.5k"},
		{1500, 500, 3000, "1500"}, {0.15, 0.05, 0.3, "0.15"}, {0.3, 0.1, 0.3, "0.3"}, {2_500_000, 500_000, 3e6, "2.5M"}, {7.5, 2.5, 10, "7.5"},
	} {
		if got := tickLabel(c.v, c.step, c.top); got != c.want {
			t.Errorf("tickLabel(%v, %v, %v) = %q, want %q", c.v, c.step, c.top, got, c.want)
		}
	}

	// A chart whose data tops out at awkward values labels its axes on
	// round ticks only: no 2.83, no 3.31k.
	for _, maxY := range []float64{2.5733, 3009.4, 818, 19_998, 0.0417, 87.36} {
		c := chart{Title: "t", Lines: []line{{Name: "l", Points: []point{{0.31, maxY / 3}, {8.97, maxY}}}}}
		svg := c.svg()
		ys := tickValues(t, svg, "ytick")
		if len(ys) < 3 || ys[0] != 0 {
			t.Fatalf("max %v: y ticks %v", maxY, ys)
		}
		step := ys[1] - ys[0]
		for i, y := range ys {
			if !isRoundStep(step) || math.Abs(y-float64(i)*step) > step*1e-6 {
				t.Errorf("max %v: y ticks %v are not multiples of a round step", maxY, ys)
				break
			}
		}
		if top := ys[len(ys)-1]; top < maxY || top > maxY*1.05+step {
			t.Errorf("max %v: y axis ends at %v", maxY, top)
		}
		xs := tickValues(t, svg, "xtick")
		if len(xs) < 4 || xs[0] != 1 || xs[len(xs)-1] != 8 {
			t.Errorf("x ticks over 0.31..8.97: %v, want 1..8", xs)
		}
	}
}

// tickValues parses the labels of one axis of an svg chart.
func tickValues(t *testing.T, svg, class string) []float64 {
	t.Helper()
	var out []float64
	for _, m := range regexp.MustCompile(`class="`+class+`">([^<]*)<`).FindAllStringSubmatch(svg, -1) {
		s, mult := m[1], 1.0
		switch {
		case strings.HasSuffix(s, "k"):
			s, mult = strings.TrimSuffix(s, "k"), 1e3
		case strings.HasSuffix(s, "M"):
			s, mult = strings.TrimSuffix(s, "M"), 1e6
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("tick label %q", m[1])
		}
		out = append(out, v*mult)
	}
	return out
}
