package results

import "fmt"

// BacklogDrain is a consumer backlog-drain workload's outcome: a backlog
// is produced while the consumers are stopped, then the consumers start
// while the producers continue, and the catch-up is measured.
type BacklogDrain struct {
	// TargetBytes is the backlog asked for; BacklogBytes and
	// BacklogMessages are the unread data (summed over the consumer
	// groups, as OMB counts it) when the consumers started.
	TargetBytes     int64 `json:"target_bytes,omitempty"`
	BacklogBytes    int64 `json:"backlog_bytes"`
	BacklogMessages int64 `json:"backlog_messages"`
	// FillSeconds is the time from the run's start (warmup included)
	// until the backlog was reached and the consumers started.
	FillSeconds  float64 `json:"fill_s,omitempty"`
	DrainSeconds float64 `json:"drain_s"`
	// DrainRate is messages consumed per second while draining (all
	// groups together).
	DrainRate float64 `json:"drain_rate"`
	// CaughtUpMessages is the unread count at or below which the backlog
	// counts as drained: producers keep running, so the lag never
	// reaches zero.
	CaughtUpMessages int64 `json:"caught_up_messages,omitempty"`
	// Drained is false when the consumers had not caught up by the time
	// the producers stopped.
	Drained bool `json:"drained"`
}

// Summary is the backlog row of the text report: what was built, and how
// fast and whether it drained.
func (b *BacklogDrain) Summary() (what, detail string) {
	what = fmt.Sprintf("%.1f MB (%d messages) unread", float64(b.BacklogBytes)/1e6, b.BacklogMessages)
	switch {
	case b.Drained:
		detail = fmt.Sprintf("drained in %.2f s at %.0f msg/s while producing", b.DrainSeconds, b.DrainRate)
	case b.DrainSeconds > 0:
		detail = fmt.Sprintf("NOT drained: %.0f msg/s read for %.2f s while producing", b.DrainRate, b.DrainSeconds)
	default:
		detail = fmt.Sprintf("NOT built: %.1f MB asked for", float64(b.TargetBytes)/1e6)
	}
	return what, detail
}

// mergeBacklog combines the backlog drains of runs made together (report
// merge, agents): the backlogs and rates add up, the fleet took as long
// as its slowest part, and it drained only if every part did. nil when no
// run had one.
func mergeBacklog(runs []*Run) *BacklogDrain {
	var out *BacklogDrain
	all := true
	for _, r := range runs {
		b := r.Result.Backlog
		if b == nil {
			all = false
			continue
		}
		if out == nil {
			out = &BacklogDrain{Drained: true}
		}
		out.TargetBytes += b.TargetBytes
		out.BacklogBytes += b.BacklogBytes
		out.BacklogMessages += b.BacklogMessages
		out.CaughtUpMessages += b.CaughtUpMessages
		out.DrainRate += b.DrainRate
		out.FillSeconds = max(out.FillSeconds, b.FillSeconds)
		out.DrainSeconds = max(out.DrainSeconds, b.DrainSeconds)
		out.Drained = out.Drained && b.Drained
	}
	if out != nil && !all {
		out.Drained = false // a part without a backlog did not measure one
	}
	return out
}
