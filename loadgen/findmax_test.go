package loadgen

import (
	"context"
	"testing"

	"github.com/ringlog/ringlog/results"
)

// simulated broker: p99 grows slowly until capacity, then explodes.
func simulated(capacity float64) StepRunner {
	return func(_ context.Context, rate float64) (results.Step, error) {
		p99 := 2 + 6*rate/capacity
		if rate > capacity {
			p99 = 500
		}
		return results.Step{AchievedRate: rate, P99Ms: p99}, nil
	}
}

func TestFindMaxBisects(t *testing.T) {
	// p99 stays under 10 ms up to capacity 37,000 (8 ms there).
	fm, err := FindMax(context.Background(), FindMaxConfig{StartRate: 1000, TargetP99: 10, Precision: 0.01, MaxSteps: 30}, simulated(37000))
	if err != nil {
		t.Fatal(err)
	}
	if fm.MaxPassingRate > 37000 || fm.MaxPassingRate < 37000*0.99 {
		t.Fatalf("max %.0f, want within 1%% below 37000; steps %+v", fm.MaxPassingRate, fm.Steps)
	}
	// Ramp 1k..32k passes, 64k fails, then bisection.
	if fm.Steps[5].TargetRate != 32000 || !fm.Steps[5].Pass || fm.Steps[6].TargetRate != 64000 || fm.Steps[6].Pass {
		t.Fatalf("ramp steps wrong: %+v", fm.Steps[:7])
	}
	for _, s := range fm.Steps {
		if s.Pass != (s.TargetRate <= 37000) {
			t.Fatalf("step %+v misjudged", s)
		}
	}
}

func TestFindMaxLatencyBound(t *testing.T) {
	// Latency crosses the 10 ms target at 2/3 of capacity, before the cliff.
	sim := func(_ context.Context, rate float64) (results.Step, error) {
		return results.Step{P99Ms: 1 + 9*rate/60000}, nil
	}
	fm, _ := FindMax(context.Background(), FindMaxConfig{StartRate: 100_000, TargetP99: 10, Precision: 0.02, MaxSteps: 20}, sim)
	// First step fails: bisect down towards 60,000.
	if fm.MaxPassingRate > 60000 || fm.MaxPassingRate < 60000*0.98 {
		t.Fatalf("max %.0f, want just under 60000; steps %+v", fm.MaxPassingRate, fm.Steps)
	}
}

func TestFindMaxErrorsAndSaturationFail(t *testing.T) {
	sim := func(_ context.Context, rate float64) (results.Step, error) {
		s := results.Step{P99Ms: 1}
		if rate > 5000 {
			s.Errors = 1
		}
		if rate > 3000 {
			s.Saturated = true
		}
		return s, nil
	}
	fm, _ := FindMax(context.Background(), FindMaxConfig{StartRate: 1000, TargetP99: 10, Precision: 0.05, MaxSteps: 20}, sim)
	if fm.MaxPassingRate > 3000 || fm.MaxPassingRate < 3000*0.95 {
		t.Fatalf("max %.0f, want just under 3000 (saturated steps cannot pass)", fm.MaxPassingRate)
	}
	if len(fm.Steps) > 20 {
		t.Fatalf("%d steps, max 20", len(fm.Steps))
	}
}

// TestFindMaxRetriesASpike: one noisy step at a rate the system can carry
// must not end the search there when retries are on, and must when off.
func TestFindMaxRetriesASpike(t *testing.T) {
	spiky := func(limit float64) StepRunner {
		spiked := false
		return func(ctx context.Context, rate float64) (results.Step, error) {
			s := results.Step{AchievedRate: rate, P99Ms: 5}
			if rate > limit {
				s.P99Ms = 50
			}
			// The first step at 8000 msg/s hits a background spike.
			if rate == 8000 && !spiked {
				spiked = true
				s.P99Ms = 80
			}
			return s, nil
		}
	}
	cfg := FindMaxConfig{StartRate: 1000, TargetP99: 10, Precision: 0.02, MaxSteps: 40}
	noRetry, _ := FindMax(context.Background(), cfg, spiky(30000))
	if noRetry.MaxPassingRate >= 8000 {
		t.Fatalf("without retries the spike should cap the search below 8000, got %.0f", noRetry.MaxPassingRate)
	}
	cfg.Retries = 1
	withRetry, _ := FindMax(context.Background(), cfg, spiky(30000))
	if withRetry.MaxPassingRate < 0.95*30000 || withRetry.MaxPassingRate > 30000 {
		t.Fatalf("with a retry the search should reach ~30000, got %.0f", withRetry.MaxPassingRate)
	}
	var attemptsAt8000 int
	for _, s := range withRetry.Steps {
		if s.TargetRate == 8000 {
			attemptsAt8000++
		}
	}
	if attemptsAt8000 != 2 {
		t.Fatalf("the spiked rate should appear twice in the step table, got %d", attemptsAt8000)
	}
}
