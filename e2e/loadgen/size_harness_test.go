package loadgen

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/results"
)

// TestHarnessSizeFromMerged is the distributed sizing path end to end with
// real processes: two loadgen processes started together (--start-at)
// against one broker, `report merge` of their directories, then
// `size --from merged --agents 2`, which must name what limited the run and
// the brokers the peak needs, from the merged run's per-broker rate.
func TestHarnessSizeFromMerged(t *testing.T) {
	ctx := harness.Context(t, 90*time.Second)
	b := harness.StartBroker(t, t.TempDir())
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, harness.RinglogBin, args...).CombinedOutput()
		return string(out), err
	}
	start := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	parts := []string{filepath.Join(dir, "h1"), filepath.Join(dir, "h2")}
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, d := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := run("loadgen", "--bootstrap", b.Addr, "--topic", "size-merged", "--partitions", "4",
				"--rate", "1000", "--message-size", "500", "--duration", "3s", "--warmup", "500ms", "--target-p99", "1s",
				"--start-at", start, "--quiet", "--out", d, "--label", filepath.Base(d))
			if err != nil {
				errs[i] = fmt.Errorf("loadgen %s: %v\n%s", d, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(dir, "merged")
	if out, err := run("report", "merge", "--out", merged, parts[0], parts[1]); err != nil {
		t.Fatalf("report merge: %v\n%s", err, out)
	}
	m, err := results.ReadJSON(merged)
	if err != nil || len(m.MergedFrom) != 2 || m.AchievedRate < 1000 {
		t.Fatalf("merged result: %v %+v", err, m)
	}

	out, err := run("size", "--from", merged, "--agents", "2", "--measured-brokers", "1", "--copies", "1")
	if err != nil {
		t.Fatalf("size: %v\n%s", err, out)
	}
	limit := regexp.MustCompile(`(?m)^Limited by: (generator|network|broker|none) - `).FindStringSubmatch(out)
	if limit == nil {
		t.Fatalf("size names no limit:\n%s", out)
	}
	if !strings.Contains(out, "from 2 client host(s) (--agents)") {
		t.Fatalf("size does not use --agents 2:\n%s", out)
	}
	brokers := regexp.MustCompile(`(?m)^Bottom line: (\d+) brokers for the peak, bound by `).FindStringSubmatch(out)
	if brokers == nil {
		t.Fatalf("size gives no broker count:\n%s", out)
	}
	// The count follows from the merged run's own rate: 5M msg/s x 1000 B
	// against its per-broker write rate (RF 1 topic, one broker).
	n, _ := strconv.Atoi(brokers[1])
	perBroker := m.AchievedRate * float64(m.MessageSize)
	if want := int(5e6 * 1000 / perBroker); n < want || n > want+1 {
		t.Fatalf("%d brokers for the peak, want %d from %.0f B/s per broker:\n%s", n, want, perBroker, out)
	}
	t.Logf("limit %s, %d brokers:\n%s", limit[1], n, out)

	// The default agent count is the runs merged.
	if out, err = run("size", "--from", merged); err != nil || !strings.Contains(out, "from 2 client host(s) (the runs merged") {
		t.Fatalf("size without --agents: %v\n%s", err, out)
	}
}
