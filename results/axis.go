package results

import (
	"math"
	"strconv"
	"strings"
)

// Axis ticks fall on round values: steps of 1, 2, 2.5 or 5 times a power
// of ten, so a reader sees 0, 2.5k, 5k, 7.5k rather than 0, 3.31k, 6.62k.

// niceStep is the smallest round step (1, 2, 2.5, 5 x 10^n) that cuts
// span into at most about n intervals.
func niceStep(span float64, n int) float64 {
	if !(span > 0) || math.IsInf(span, 0) || n < 1 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// niceTicks returns the multiples of step within [lo, hi].
func niceTicks(lo, hi, step float64) []float64 {
	if !(step > 0) || hi < lo {
		return nil
	}
	var out []float64
	first := math.Ceil(lo/step - 1e-9)
	for i := first; ; i++ {
		v := i * step
		if v > hi+step*1e-9 {
			break
		}
		// i*step, never an accumulated sum: 0.1+0.2 drifts, 3*0.1 less so;
		// rounding to the step's own precision removes what is left.
		out = append(out, roundTo(v, step))
		if len(out) > 1000 {
			break
		}
	}
	return out
}

// roundTo rounds v to the decimals that step needs.
func roundTo(v, step float64) float64 {
	d := stepDecimals(step)
	p := math.Pow(10, float64(d))
	r := math.Round(v*p) / p
	if r == 0 {
		return 0 // no "-0"
	}
	return r
}

// stepDecimals is how many decimals a multiple of step needs (2.5 -> 1,
// 0.05 -> 2, 500 -> 0).
func stepDecimals(step float64) int {
	for d := 0; d < 12; d++ {
		p := math.Pow(10, float64(d))
		if math.Abs(step*p-math.Round(step*p)) < 1e-6*step*p {
			return d
		}
	}
	return 12
}

// tickLabel writes v, a multiple of step on an axis that reaches top,
// with the axis's unit (k, M) and just the decimals the step needs:
// 2.5k, 5k, 7.5k; 0.05, 0.1, 0.15.
func tickLabel(v, step, top float64) string {
	if v == 0 {
		return "0"
	}
	unit, suffix := 1.0, ""
	switch {
	case math.Abs(top) >= 1e6:
		unit, suffix = 1e6, "M"
	case math.Abs(top) >= 1e4:
		unit, suffix = 1e3, "k"
	}
	s := strconv.FormatFloat(roundTo(v/unit, step/unit), 'f', stepDecimals(step/unit), 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + suffix
}
