package groups

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupBench measures, for BENCHMARKS.md, the rebalance of a 10-member
// group (range) after one member leaves and after one is SIGKILLed (the
// group notices at the session timeout), and OffsetCommit throughput and
// latency on one coordinator. Benchmark only:
//
//	RINGLOG_GROUP_BENCH=1 go test -run TestGroupBench -v ./cmd/ringlog
func TestGroupBench(t *testing.T) {
	harness.Processes(t) // a benchmark of broker processes
	if os.Getenv("RINGLOG_GROUP_BENCH") != "1" {
		t.Skip("set RINGLOG_GROUP_BENCH=1")
	}
	b, _, adm := startGroupBroker(t)
	const topic, group, parts = "bench-groups", "bench-g", 20
	if _, err := adm.CreateTopic(harness.Context(t, 20*time.Second), parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Nine members in this process, one in a child process we can kill.
	var ms []*harness.Member
	for range 9 {
		ms = append(ms, harness.StartMember(t, b.Addr, group, topic, kgo.RangeBalancer()))
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestGroupBenchChild$")
	child.Env = append(os.Environ(), "RINGLOG_GROUP_BENCH_CHILD="+b.Addr, "RINGLOG_TEST_BIN="+harness.RinglogBin)
	// The child runs until killed or until its stdin closes: this process
	// holds the write end until child.Wait, so an orphan ends too.
	if _, err := child.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	waitFor := func(what string, ok func() (bool, string)) time.Duration {
		return harness.Eventually(t, 60*time.Second, what, ok)
	}
	// stable: every in-process member owns at least min partitions, none
	// twice, and together between lo and hi of them.
	stable := func(min, lo, hi int) func() (bool, string) {
		return func() (bool, string) {
			seen := map[int32]bool{}
			var owned [][]int32
			ok := true
			for _, m := range ms {
				a := m.Assigned()
				owned = append(owned, a)
				if len(a) < min {
					ok = false
				}
				for _, p := range a {
					if seen[p] {
						ok = false
					}
					seen[p] = true
				}
			}
			return ok && len(seen) >= lo && len(seen) <= hi, fmt.Sprint("in-process members own ", owned)
		}
	}
	// settled: the balance holds for 3 s, franz-go's heartbeat interval,
	// before the next event: a rebalance still under way would reach every
	// member within it, and blur the next measurement.
	settled := func(what string, ok func() (bool, string)) {
		harness.Holds(t, 3*time.Second, what, ok)
	}
	waitFor("10 members", stable(2, parts-2, parts-2))
	settled("10 members stay balanced", stable(2, parts-2, parts-2))
	// Leave: one in-process member closes; 8 + the child rebalance.
	ms[0].Close()
	ms = ms[1:]
	leave := waitFor("after leave", stable(2, parts-3, parts-2))
	settled("9 members stay balanced", stable(2, parts-3, parts-2))
	// Kill: the child dies without leaving; the 8 survivors own all 20.
	child.Process.Kill()
	kill := waitFor("after kill", stable(2, parts, parts))
	for _, m := range ms {
		m.Close()
	}
	t.Logf("rebalance, 10 members, 20 partitions, range: one leaves -> %v; one SIGKILLed (session 6s) -> %v", leave.Round(time.Millisecond), kill.Round(time.Millisecond))

	// OffsetCommit: 8 concurrent committers (simple commits, 1 partition each).
	const workers, per = 8, 500
	lat := make([][]time.Duration, workers)
	done := make(chan error, workers)
	t0 := time.Now()
	for w := range workers {
		go func() {
			c, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			a := kadm.NewClient(c)
			for i := range per {
				o := kadm.Offsets{}
				o.AddOffset(topic, int32(w), int64(i), -1)
				s := time.Now()
				r, err := a.CommitOffsets(context.Background(), fmt.Sprintf("commit-bench-%d", w), o)
				if err == nil {
					err = r.Error()
				}
				if err != nil {
					done <- err
					return
				}
				lat[w] = append(lat[w], time.Since(s))
			}
			done <- nil
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	el := time.Since(t0)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	t.Logf("OffsetCommit: %d commits by %d clients in %v = %.0f commits/s; p50 %v p99 %v max %v",
		len(all), workers, el.Round(time.Millisecond), float64(len(all))/el.Seconds(),
		all[len(all)/2].Round(time.Microsecond), all[len(all)*99/100].Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
}

// TestGroupBenchChild is the killable member of TestGroupBench.
func TestGroupBenchChild(t *testing.T) {
	addr := os.Getenv("RINGLOG_GROUP_BENCH_CHILD")
	if addr == "" {
		t.Skip("child of TestGroupBench")
	}
	m := harness.StartMember(t, addr, "bench-g", "bench-groups", kgo.RangeBalancer())
	defer m.Close()
	// Until the parent kills this process, or is gone itself.
	io.Copy(io.Discard, os.Stdin)
}
