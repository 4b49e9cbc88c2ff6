package results

import (
	"strings"
	"testing"
)

func TestMergeBacklog(t *testing.T) {
	a := &Run{Result: Result{Backlog: &BacklogDrain{TargetBytes: 100, BacklogBytes: 120, BacklogMessages: 12, FillSeconds: 1, DrainSeconds: 2, DrainRate: 50, CaughtUpMessages: 3, Drained: true}}}
	b := &Run{Result: Result{Backlog: &BacklogDrain{TargetBytes: 100, BacklogBytes: 110, BacklogMessages: 11, FillSeconds: 1.5, DrainSeconds: 3, DrainRate: 40, CaughtUpMessages: 2, Drained: true}}}
	got := mergeBacklog([]*Run{a, b})
	want := BacklogDrain{TargetBytes: 200, BacklogBytes: 230, BacklogMessages: 23, FillSeconds: 1.5, DrainSeconds: 3, DrainRate: 90, CaughtUpMessages: 5, Drained: true}
	if got == nil || *got != want {
		t.Fatalf("merged %+v, want %+v", got, want)
	}
	b.Result.Backlog.Drained = false
	if got := mergeBacklog([]*Run{a, b}); got.Drained {
		t.Error("one part not drained: merged says drained")
	}
	if got := mergeBacklog([]*Run{a, {}}); got == nil || got.Drained {
		t.Errorf("a part without a backlog: %+v, want not drained", got)
	}
	if mergeBacklog([]*Run{{}, {}}) != nil {
		t.Error("no backlog anywhere: merged has one")
	}
	m, err := Merge([]*Run{a, b})
	if err != nil || m.Result.Backlog == nil || m.Result.Backlog.BacklogMessages != 23 {
		t.Fatalf("Merge dropped the backlog: %+v, %v", m.Result.Backlog, err)
	}
	var sb strings.Builder
	WriteSummary(&sb, &m.Result)
	if !strings.Contains(sb.String(), "NOT drained") {
		t.Errorf("summary lacks the backlog row:\n%s", sb.String())
	}
}
