package results

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// RunVerdict is the answer a report leads with: did the run pass, and if
// not, every reason it did not. It is stricter than SLA.Pass (p99 and
// errors only): a saturated generator, an interrupted or incomplete run
// or a missing agent means the numbers do not describe the planned load,
// so the run cannot pass.
type RunVerdict struct {
	Pass    bool
	Reasons []string
	// Note names a cause without changing the verdict: CPU contention
	// (counters.go) when brokers and generator together used more than
	// ContentionShare of the cores of the machine they share.
	Note string
}

// VerdictOf judges r against its p99 target.
func VerdictOf(r *Result) RunVerdict {
	var why []string
	if len(r.Sweep) > 0 {
		for _, row := range r.Sweep {
			switch {
			case row.Saturated:
				why = append(why, fmt.Sprintf("%d partitions: generator saturated", row.Partitions))
			case !row.Pass:
				why = append(why, fmt.Sprintf("%d partitions: ack p99 %.3f ms, %d errors (target p99 %.3f ms, no errors)",
					row.Partitions, row.AckLatencyMs.P99, row.Errors, r.SLA.TargetP99Ms))
			}
		}
	} else {
		if r.AckLatencyMs.Count == 0 && r.MessagesAcked == 0 {
			why = append(why, "no message was acknowledged")
		} else if r.AckLatencyMs.P99 > r.SLA.TargetP99Ms {
			why = append(why, fmt.Sprintf("ack p99 %.3f ms is over the target %.3f ms", r.AckLatencyMs.P99, r.SLA.TargetP99Ms))
		}
		if r.Errors > 0 {
			why = append(why, fmt.Sprintf("%d messages failed", r.Errors))
		}
		// A distributed run names its saturated agents one by one (its
		// SaturationReason lists the same agents again).
		agentsSaturated := false
		for _, a := range r.Agents {
			if a.Saturated && !a.Missing {
				why = append(why, fmt.Sprintf("agent %s saturated: %s", a.Name, a.SaturationReason))
				agentsSaturated = true
			}
		}
		if r.GeneratorSaturated && !agentsSaturated {
			why = append(why, "generator saturated: "+r.SaturationReason)
		}
	}
	if r.Incomplete {
		why = append(why, "run incomplete: "+orUnknown(r.IncompleteReason))
	} else {
		// A missing agent without the flag still means missing load.
		for _, a := range r.Agents {
			if a.Missing {
				why = append(why, fmt.Sprintf("agent %s missing: %s", a.Name, orUnknown(a.MissingReason)))
			}
		}
	}
	if r.Interrupted {
		why = append(why, "interrupted before its planned end")
	}
	return RunVerdict{Pass: len(why) == 0, Reasons: why, Note: contentionNote(r)}
}

// Headline is the verdict in one line: "PASS: ..." or "FAIL: reason; reason".
func (v RunVerdict) Headline(r *Result) string {
	if v.Pass {
		what := fmt.Sprintf("ack p99 %.3f ms <= target %.3f ms, no errors, generator kept its schedule", r.AckLatencyMs.P99, r.SLA.TargetP99Ms)
		if len(r.Sweep) > 0 {
			what = fmt.Sprintf("every partition count met ack p99 <= %.3f ms with no errors", r.SLA.TargetP99Ms)
		}
		return "PASS: " + what + v.noteSuffix()
	}
	return "FAIL: " + strings.Join(v.Reasons, "; ") + v.noteSuffix()
}

func (v RunVerdict) noteSuffix() string {
	if v.Note == "" {
		return ""
	}
	return " — " + v.Note
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// envField is one row of the environment table.
type envField struct {
	Key, Name, Value string
}

// environmentFields lists what the run was measured against, in report
// order; unknown values read "unknown" so a missing field is visible.
func environmentFields(e Environment) []envField {
	num := func(n int) string {
		if n <= 0 {
			return "unknown"
		}
		return fmt.Sprint(n)
	}
	broker := orUnknown(e.BrokerVersion)
	if e.BrokerHealthz != "" {
		broker += " (healthz: " + e.BrokerHealthz + ")"
	}
	return []envField{
		{"broker_version", "broker version", broker},
		{"broker_commit", "broker commit", orUnknown(e.BrokerCommit)},
		{"io_path", "io path", orUnknown(e.BrokerIOPath)},
		{"fsync", "fsync policy", orUnknown(e.BrokerFsync)},
		{"broker_max_procs", "broker GOMAXPROCS", maxProcs(e)},
		{"broker_sched_policy", "broker scheduling policy", orUnknown(e.BrokerSchedPolicy)},
		{"replication_factor", "replication factor", num(e.ReplicationFactor)},
		{"min_isr", "min ISR", num(e.MinISR)},
		{"partitions", "partitions", num(e.Partitions)},
		{"acks", "acks", orUnknown(e.Acks)},
		{"compression", "compression", orUnknown(e.Compression)},
		{"client_hosts", "client hosts", num(e.ClientHosts)},
		{"client_cpus", "client CPUs", num(e.ClientCPUs)},
		{"client", "client", orUnknown(e.Client)},
		{"kernel", "kernel", orUnknown(e.Kernel)},
		{"cpu_model", "CPU model", orUnknown(e.CPUModel)},
		{"loadgen", "load generator", strings.TrimSpace(orUnknown(e.LoadgenVersion) + " " + e.LoadgenCommit)},
	}
}

// maxProcs is "N of C CPUs" for the broker's GOMAXPROCS.
func maxProcs(e Environment) string {
	switch {
	case e.BrokerMaxProcs <= 0:
		return "unknown"
	case e.BrokerCPUs <= 0:
		return fmt.Sprint(e.BrokerMaxProcs)
	}
	return fmt.Sprintf("%d of %d CPUs", e.BrokerMaxProcs, e.BrokerCPUs)
}

// WriteEnvironment prints the environment table of r.
func WriteEnvironment(w io.Writer, r *Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "environment")
	for _, f := range environmentFields(r.Environment) {
		if len(r.Sweep) > 0 && f.Key == "partitions" {
			f.Value = "one row per count, above" // the environment is the first row's
		}
		fmt.Fprintf(tw, "  %s\t%s\n", f.Name, f.Value)
	}
	tw.Flush()
}

// WriteAgents prints the per-agent breakdown of a distributed run.
func WriteAgents(w io.Writer, agents []AgentResult) {
	if len(agents) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "agent\thost\tcores\ttarget msg/s\tachieved\tsent\tacked\terrors\tp50 ms\tp99 ms\tmax ms\tsaturated\tstatus\t")
	for _, a := range agents {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%v\t%s\t\n",
			a.Name, orDash(a.Hostname), a.Cores, a.TargetRate, a.AchievedRate, a.MessagesSent, a.MessagesAcked, a.Errors,
			a.AckLatencyMs.P50, a.AckLatencyMs.P99, a.AckLatencyMs.Max, a.Saturated, agentStatus(a))
	}
	tw.Flush()
	// Reasons are too long for a column.
	for _, a := range agents {
		if a.Missing {
			fmt.Fprintf(w, "agent %s MISSING: %s\n", a.Name, orUnknown(a.MissingReason))
		}
		if a.Saturated && a.SaturationReason != "" {
			fmt.Fprintf(w, "agent %s saturated: %s\n", a.Name, a.SaturationReason)
		}
	}
}

func agentStatus(a AgentResult) string {
	if a.Missing {
		return "MISSING"
	}
	return "ok"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
