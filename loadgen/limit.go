package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ringlog/ringlog/results"
)

// What can limit a measured run, in the order Diagnose weighs them: a
// generator that could not keep its schedule hides the broker's limit, a
// full network hides both, and only then do latency or CPU point at the
// broker.
const (
	LimitGenerator = "generator"
	LimitNetwork   = "network"
	LimitBroker    = "broker"
	LimitNone      = "none"
)

// nearFull: a NIC or the broker's cores at this fraction or more of what
// is available count as the limit (framing and bursts take the rest).
const nearFull = 0.8

// sendDelayGrowth: a host whose send-delay p99 in the last third of the
// window is this many times that of the first third, and above
// sendDelayGrowthMinMs, was falling behind even if not yet saturated.
const (
	sendDelayGrowth      = 2.0
	sendDelayGrowthMinMs = 1.0
)

// ErrSizeIncomplete is returned by Diagnose for a run with missing load
// unless DiagnoseOptions.AllowIncomplete.
var ErrSizeIncomplete = errors.New("incomplete run")

// DiagnoseOptions are the facts about the measured setup the result may
// not hold.
type DiagnoseOptions struct {
	// Dir is the result directory: agents' and merged parts' directories
	// are found relative to it.
	Dir string
	// Agents overrides the client host count the result records (0: the
	// recorded one).
	Agents int
	// Brokers overrides the broker count (0: cluster_brokers, else 1).
	Brokers int
	// NICBitsPerSec is each host's network, each direction (0: not weighed).
	NICBitsPerSec float64
	// BrokerCores is the cores of one broker host (0: the run's own host
	// when the brokers ran beside the generator, as bench's do; else
	// unknown).
	BrokerCores float64
	// AllowIncomplete extrapolates from a run with missing agents.
	AllowIncomplete bool
}

// Diagnosis is what limited a measured run, with the figures the
// extrapolation uses.
type Diagnosis struct {
	// Rate is the measured msg/s the extrapolation uses; RateFrom says
	// which figure it is.
	Rate     float64 `json:"rate"`
	RateFrom string  `json:"rate_from"`
	// Agents is the client host count; AgentsFrom says where it came from.
	Agents            int     `json:"agents"`
	AgentsFrom        string  `json:"agents_from"`
	Brokers           int     `json:"brokers"`
	BrokersFrom       string  `json:"brokers_from"`
	ReplicationFactor float64 `json:"replication_factor"`
	MessageBytes      float64 `json:"message_bytes"`
	// Per-broker and per-client-host payload traffic at Rate: a broker
	// receives its share of produce and replication and sends its share of
	// replication and consumer reads.
	BrokerWriteBps  float64 `json:"broker_write_bps"`
	BrokerInBps     float64 `json:"broker_in_bps"`
	BrokerOutBps    float64 `json:"broker_out_bps"`
	ClientHostBps   float64 `json:"client_host_bps"`
	PerAgentRate    float64 `json:"per_agent_rate"`
	TargetP99Ms     float64 `json:"target_p99_ms"`
	MetTarget       bool    `json:"met_target"`
	GeneratorAtEdge bool    `json:"generator_at_limit"`
	// Limit is the first of generator, network, broker that the evidence
	// supports, or none; Evidence lists every finding, Limit's first.
	Limit    string     `json:"limit"`
	Evidence []Evidence `json:"evidence"`
	// LowerBound says the brokers were not shown to be at their limit, so
	// the per-broker rate is what they did, not what they can do.
	LowerBound bool     `json:"lower_bound"`
	Notes      []string `json:"notes,omitempty"`
}

// Evidence is one finding about a limit.
type Evidence struct {
	Limit  string `json:"limit"`
	Detail string `json:"detail"`
}

// Diagnose says what limited the run r: generator, network, broker, or
// none, with the evidence; a run with missing load is refused
// (ErrSizeIncomplete) unless o.AllowIncomplete.
func Diagnose(r *results.Result, o DiagnoseOptions) (*Diagnosis, error) {
	var missing []string
	for _, a := range r.Agents {
		if a.Missing {
			missing = append(missing, fmt.Sprintf("%s (%s)", a.Name, a.MissingReason))
		}
	}
	if (r.Incomplete || len(missing) > 0) && !o.AllowIncomplete {
		msg := r.IncompleteReason
		if len(missing) > 0 {
			msg = strings.TrimPrefix(msg+"; missing agents: "+strings.Join(missing, ", "), "; ")
		}
		return nil, fmt.Errorf("%w: %s; its rates undercount the load offered, so size refuses to extrapolate (--allow-incomplete to do it anyway)", ErrSizeIncomplete, msg)
	}
	d := &Diagnosis{MessageBytes: float64(r.MessageSize), TargetP99Ms: r.SLA.TargetP99Ms, ReplicationFactor: 1, Evidence: []Evidence{}}
	if r.Incomplete || len(missing) > 0 {
		why := r.IncompleteReason
		if len(missing) > 0 {
			why = strings.TrimPrefix(why+"; missing: "+strings.Join(missing, ", "), "; ")
		}
		d.Notes = append(d.Notes, fmt.Sprintf("INCOMPLETE run (%s): the figures count only the load that was measured", why))
	}
	if d.MessageBytes <= 0 {
		return nil, fmt.Errorf("result has no message size")
	}
	if v, err := strconv.ParseFloat(r.Workload["replication_factor"], 64); err == nil && v >= 1 {
		d.ReplicationFactor = v
	} else if r.Environment.ReplicationFactor > 0 {
		d.ReplicationFactor = float64(r.Environment.ReplicationFactor)
	}
	d.Brokers, d.BrokersFrom = o.Brokers, "--measured-brokers"
	if d.Brokers <= 0 {
		d.Brokers, d.BrokersFrom = 1, "assumed (the run recorded no broker count)"
		if n, err := strconv.Atoi(r.Workload["cluster_brokers"]); err == nil && n > 0 {
			d.Brokers, d.BrokersFrom = n, "the cluster's metadata at run time"
		}
	}
	d.Agents, d.AgentsFrom = agentCount(r, o.Agents)

	if err := d.limitFromRun(r, o); err != nil {
		return nil, err
	}
	d.PerAgentRate = d.Rate / float64(d.Agents)
	payload := d.Rate * d.MessageBytes
	consumed := 0.0
	if r.DurationS > 0 && r.MessagesConsumed > 0 && r.MessagesAcked > 0 {
		// Consumer groups read what was produced: scale their share to Rate.
		consumed = payload * float64(r.MessagesConsumed) / float64(r.MessagesAcked)
	}
	b := float64(d.Brokers)
	d.BrokerWriteBps = payload * d.ReplicationFactor / b
	d.BrokerInBps = d.BrokerWriteBps
	d.BrokerOutBps = (payload*(d.ReplicationFactor-1) + consumed) / b
	d.ClientHostBps = (payload + consumed) / float64(d.Agents)
	d.networkEvidence(o.NICBitsPerSec)
	d.decide()
	return d, nil
}

// agentCount is the client host count: the flag, the agents the run
// recorded, the environment's client hosts or the runs merged, else 1.
func agentCount(r *results.Result, flag int) (int, string) {
	switch {
	case flag > 0:
		return flag, "--agents"
	case len(r.Agents) > 0:
		// A missing agent's share is not in the rates (or only until it
		// was lost): per-host figures are those of the agents that stayed.
		n := 0
		for _, a := range r.Agents {
			if !a.Missing {
				n++
			}
		}
		if n < len(r.Agents) {
			return max(n, 1), fmt.Sprintf("the agents the run recorded, %d missing not counted", len(r.Agents)-n)
		}
		return n, "the agents the run recorded"
	case r.Environment.ClientHosts > 1 && r.Environment.ClientHosts >= len(r.MergedFrom):
		return r.Environment.ClientHosts, "environment client_hosts"
	case len(r.MergedFrom) > 1:
		return len(r.MergedFrom), "the runs merged (merged_from; give --agents if several ran on one host)"
	case r.Environment.ClientHosts > 0:
		return r.Environment.ClientHosts, "environment client_hosts"
	}
	return 1, "one generator (the run recorded no agents)"
}

func (d *Diagnosis) add(limit, format string, args ...any) {
	d.Evidence = append(d.Evidence, Evidence{Limit: limit, Detail: fmt.Sprintf(format, args...)})
}

// limitFromRun picks the rate and the generator and broker evidence: for a
// find-max result from the first failing step above the passing rate, for
// a fixed-rate run from the run and its parts.
func (d *Diagnosis) limitFromRun(r *results.Result, o DiagnoseOptions) error {
	if fm := r.FindMax; fm != nil {
		if fm.MaxPassingRate <= 0 {
			return fmt.Errorf("result has no passing find-max rate")
		}
		d.Rate, d.RateFrom, d.MetTarget, d.TargetP99Ms = fm.MaxPassingRate, "the highest find-max rate that passed", true, fm.TargetP99Ms
		var fail *results.Step
		for i := range fm.Steps {
			s := &fm.Steps[i]
			if !s.Pass && s.TargetRate > fm.MaxPassingRate && (fail == nil || s.TargetRate < fail.TargetRate) {
				fail = s
			}
		}
		if fail == nil {
			d.Notes = append(d.Notes, "no find-max step above the passing rate failed: the search ended before finding a limit")
			return nil
		}
		switch {
		case fail.Saturated:
			d.GeneratorAtEdge = true
			d.add(LimitGenerator, "the first failing step (%.0f msg/s offered, %.0f achieved) had a saturated generator", fail.TargetRate, fail.AchievedRate)
		case fail.Errors > 0 || fail.P99Ms > fm.TargetP99Ms:
			d.add(LimitBroker, "the first failing step (%.0f msg/s offered) had ack p99 %.4g ms against the %.4g ms target and %d errors, with the generator keeping its schedule",
				fail.TargetRate, fail.P99Ms, fm.TargetP99Ms, fail.Errors)
		}
		if fail.CPUPerGB > 0 && fail.AchievedRate > 0 {
			used := fail.CPUPerGB * fail.AchievedRate * d.MessageBytes / 1e9
			d.cpuEvidence(used, r, o, fmt.Sprintf("at the first failing step (%.0f msg/s)", fail.TargetRate))
		}
		return nil
	}
	if len(r.Sweep) > 0 {
		return fmt.Errorf("a partition sweep has no rate of its own: give one of its runs' directories (%s)", r.Sweep[0].Dir)
	}
	if r.AchievedRate <= 0 || r.DurationS <= 0 {
		return fmt.Errorf("result has neither a find-max search nor a measured rate")
	}
	d.Rate, d.RateFrom, d.MetTarget = r.AchievedRate, "the achieved rate of the fixed-rate run", r.SLA.Pass
	if r.GeneratorSaturated {
		d.GeneratorAtEdge = true
		d.add(LimitGenerator, "generator saturated: %s", r.SaturationReason)
	}
	for _, a := range r.Agents {
		if a.Saturated {
			d.GeneratorAtEdge = true
			d.add(LimitGenerator, "agent %s saturated at %.0f of %.0f msg/s: %s", a.Name, a.AchievedRate, a.TargetRate, a.SaturationReason)
		}
	}
	d.partEvidence(r, o.Dir)
	if !r.SLA.Pass {
		d.add(LimitBroker, "the run failed its target: ack p99 %.4g ms against %.4g ms, %d errors, at %.0f msg/s",
			r.AckLatencyMs.P99, r.SLA.TargetP99Ms, r.Errors, r.AchievedRate)
	}
	if c := r.BrokerCPU; c != nil && c.WindowS > 0 {
		d.cpuEvidence(c.Seconds/c.WindowS, r, o, fmt.Sprintf("over the %.0f s window (%d broker processes)", c.WindowS, c.Processes))
	}
	return nil
}

// cpuEvidence weighs the brokers' CPU use (cores busy, all brokers)
// against the cores they had.
func (d *Diagnosis) cpuEvidence(used float64, r *results.Result, o DiagnoseOptions, when string) {
	avail, from := o.BrokerCores*float64(d.Brokers), "--broker-cores x brokers"
	if avail <= 0 && r.BrokerCPU != nil && r.Environment.Cores > 0 {
		// bench runs its brokers beside the generator: they share its cores.
		avail, from = float64(r.Environment.Cores), "the run's host, shared with the generator"
	}
	if avail <= 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("brokers used %.2f cores %s; give --broker-cores to weigh that", used, when))
		return
	}
	if used >= nearFull*avail {
		d.add(LimitBroker, "broker CPU %.2f of %.0f cores (%s) %s", used, avail, from, when)
	} else {
		d.Notes = append(d.Notes, fmt.Sprintf("broker CPU %.2f of %.0f cores (%s) %s: not the limit", used, avail, from, when))
	}
}

// partEvidence looks at each client host's own send delay: a host whose
// lateness grew over its window was falling behind even where the merged
// figures hide it. Parts are the agents' directories or the runs merged;
// the run itself when it has neither.
func (d *Diagnosis) partEvidence(r *results.Result, dir string) {
	var parts []string
	for _, a := range r.Agents {
		if a.Dir != "" && !a.Missing {
			parts = append(parts, a.Dir)
		}
	}
	if len(parts) == 0 {
		parts = r.MergedFrom
	}
	if len(parts) == 0 && dir != "" {
		parts = []string{"."}
	}
	for _, p := range parts {
		pd := resolvePart(dir, p)
		if pd == "" {
			d.Notes = append(d.Notes, fmt.Sprintf("part %s not found: its send delay was not checked", p))
			continue
		}
		run, err := results.Load(pd)
		if err != nil {
			d.Notes = append(d.Notes, fmt.Sprintf("part %s: %v: its send delay was not checked", p, err))
			continue
		}
		name := p
		if p == "." {
			name = "the generator"
		}
		if p != "." && run.Result.GeneratorSaturated && !r.GeneratorSaturated {
			d.GeneratorAtEdge = true
			d.add(LimitGenerator, "%s saturated: %s", name, run.Result.SaturationReason)
		}
		if first, last, ok := sendDelayTrend(run.SendDelay); ok && last > sendDelayGrowthMinMs && last > sendDelayGrowth*first {
			d.GeneratorAtEdge = true
			d.add(LimitGenerator, "%s fell behind: send delay p99 grew from %.2f ms (first third of the window) to %.2f ms (last third)", name, first, last)
		}
	}
}

// resolvePart finds a part's result directory: absolute, under the merged
// directory, beside it, or as given (relative to the working directory,
// as `report merge` recorded it).
func resolvePart(dir, p string) string {
	cands := []string{p}
	if !filepath.IsAbs(p) && dir != "" {
		cands = []string{filepath.Join(dir, p), filepath.Join(filepath.Dir(dir), filepath.Base(p)), p}
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, results.ResultFile)); err == nil {
			return c
		}
	}
	return ""
}

// sendDelayTrend is the send-delay p99 (ms) of the first and last third of
// the intervals; ok is false with fewer than three.
func sendDelayTrend(hs []*hdr.Histogram) (first, last float64, ok bool) {
	n := len(hs)
	if n < 3 {
		return 0, 0, false
	}
	p99 := func(part []*hdr.Histogram) float64 {
		return float64(results.MergeAll(part).ValueAtQuantile(99)) / 1000
	}
	return p99(hs[:n/3]), p99(hs[n-n/3:]), true
}

// networkEvidence weighs the busiest broker's and client host's payload
// traffic against the NIC.
func (d *Diagnosis) networkEvidence(nic float64) {
	if nic <= 0 {
		d.Notes = append(d.Notes, "network not weighed: give --nic-gbps")
		return
	}
	for _, c := range []struct {
		what string
		bps  float64
	}{
		{"each broker receives", d.BrokerInBps},
		{"each broker sends", d.BrokerOutBps},
		{"each client host sends", d.ClientHostBps},
	} {
		if c.bps*8 >= nearFull*nic {
			d.add(LimitNetwork, "%s %.3g Gbit/s of payload, %.0f%% of the %.3g Gbit/s NIC", c.what, c.bps*8/1e9, 100*c.bps*8/nic, nic/1e9)
		}
	}
}

// decide picks the limit in order generator, network, broker and says
// whether the per-broker figure is only a lower bound.
func (d *Diagnosis) decide() {
	d.Limit = LimitNone
	for _, l := range []string{LimitGenerator, LimitNetwork, LimitBroker} {
		for i, e := range d.Evidence {
			if e.Limit == l {
				d.Limit = l
				// Put the deciding finding first.
				d.Evidence[0], d.Evidence[i] = d.Evidence[i], d.Evidence[0]
				break
			}
		}
		if d.Limit != LimitNone {
			break
		}
	}
	d.LowerBound = d.Limit != LimitBroker
}

// WriteDiagnosis prints the limit, its evidence and the measured figures
// the extrapolation takes.
func WriteDiagnosis(w io.Writer, d *Diagnosis, peak float64) {
	gbit := func(bps float64) string { return fmt.Sprintf("%.3g Gbit/s", bps*8/1e9) }
	switch d.Limit {
	case LimitGenerator:
		fmt.Fprintln(w, "Limited by: generator - the load generators could not keep their schedule; rerun with more agents (--agents) or fewer producers per agent.")
	case LimitNetwork:
		fmt.Fprintln(w, "Limited by: network - the payload traffic is near the NIC; the broker's own limit was not reached.")
	case LimitBroker:
		fmt.Fprintln(w, "Limited by: broker - it missed the latency target (or ran out of CPU) while the generators kept their schedule.")
	default:
		fmt.Fprintf(w, "Limited by: none - the run met its %.4g ms p99 target at the rate offered, so the per-broker figure below is a lower bound.\n", d.TargetP99Ms)
	}
	for _, e := range d.Evidence {
		fmt.Fprintf(w, "  [%s] %s\n", e.Limit, e.Detail)
	}
	for _, n := range d.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintf(w, "Measured figures used: %.0f msg/s (%s) of %.0f-byte messages, RF %.0f, on %d broker(s) (%s) from %d client host(s) (%s):\n",
		d.Rate, d.RateFrom, d.MessageBytes, d.ReplicationFactor, d.Brokers, d.BrokersFrom, d.Agents, d.AgentsFrom)
	fmt.Fprintf(w, "  per broker: %.4g GB/s written (all copies), in %s, out %s; per client host: %.0f msg/s, out %s\n",
		d.BrokerWriteBps/1e9, gbit(d.BrokerInBps), gbit(d.BrokerOutBps), d.PerAgentRate, gbit(d.ClientHostBps))
	if d.PerAgentRate > 0 && peak > 0 {
		how := "fewer if they had headroom"
		if d.GeneratorAtEdge {
			how = "they were at their limit"
		}
		fmt.Fprintf(w, "  generating the %.0f msg/s peak at %.0f msg/s per host takes %d client hosts (%s)\n",
			peak, d.PerAgentRate, int(math.Ceil(peak/d.PerAgentRate)), how)
	}
	if !d.MetTarget {
		fmt.Fprintln(w, "  WARNING: the run did not meet its target at this rate: the brokers below are an upper-bound rate's count, so too few; size from a passing run (--find-max).")
	} else if d.LowerBound {
		fmt.Fprintln(w, "  The brokers were not shown to be at their limit: the per-broker rate is a lower bound and the broker count below an upper bound.")
	}
}
