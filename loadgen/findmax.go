package loadgen

import (
	"context"
	"fmt"

	"github.com/ringlog/ringlog/results"
)

// StepRunner runs one fixed-rate step and reports it (Pass is set by
// FindMax).
type StepRunner func(ctx context.Context, rate float64) (results.Step, error)

// FindMaxConfig bounds a search.
type FindMaxConfig struct {
	StartRate float64
	TargetP99 float64 // ms
	// Precision stops bisection when (fail-pass) <= Precision*fail.
	Precision float64
	MaxSteps  int
	// Retries re-runs a failing rate this many times before it counts as
	// failed: on a shared machine one background spike can push a single
	// step's p99 over the target, and a search that trusts it settles far
	// below the real limit. Every attempt is kept in the step table.
	Retries int
}

// FindMax doubles the rate from StartRate until a step fails (p99 above
// target, any error, or a saturated generator), then bisects between the
// last passing and the first failing rate. A failing first step bisects
// down towards zero.
func FindMax(ctx context.Context, fc FindMaxConfig, run StepRunner) (*results.FindMax, error) {
	if fc.StartRate <= 0 || fc.TargetP99 <= 0 || fc.MaxSteps < 1 || fc.Precision <= 0 || fc.Retries < 0 {
		return nil, fmt.Errorf("find-max: invalid config %+v", fc)
	}
	out := &results.FindMax{TargetP99Ms: fc.TargetP99}
	attempt := func(rate float64) (bool, error) {
		s, err := run(ctx, rate)
		if err != nil {
			return false, err
		}
		s.TargetRate = rate
		s.Pass = s.Errors == 0 && !s.Saturated && s.P99Ms <= fc.TargetP99
		out.Steps = append(out.Steps, s)
		if s.Pass && rate > out.MaxPassingRate {
			out.MaxPassingRate = rate
		}
		return s.Pass, nil
	}
	try := func(rate float64) (bool, error) {
		for i := 0; ; i++ {
			ok, err := attempt(rate)
			if ok || err != nil || i >= fc.Retries || len(out.Steps) >= fc.MaxSteps {
				return ok, err
			}
		}
	}
	pass, fail := 0.0, 0.0
	for rate := fc.StartRate; len(out.Steps) < fc.MaxSteps; rate *= 2 {
		ok, err := try(rate)
		if err != nil {
			return out, err
		}
		if !ok {
			fail = rate
			break
		}
		pass = rate
	}
	for fail > 0 && fail-pass > fc.Precision*fail && len(out.Steps) < fc.MaxSteps {
		mid := (pass + fail) / 2
		ok, err := try(mid)
		if err != nil {
			return out, err
		}
		if ok {
			pass = mid
		} else {
			fail = mid
		}
	}
	return out, nil
}
