package broker

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ringlog/ringlog/internal/procstat"
)

// The process's own cost counters: context switches as a Prometheus
// counter next to client_golang's process_cpu_seconds_total, and
// procstat.CountersPath (/v1/process/counters), the snapshot `ringlog loadgen --broker-admin`
// reads at the start and the end of a measured window (CPU time and
// context switches from getrusage, exited threads included, plus the live
// threads' switches by thread from /proc/self/task).

var descContextSwitches = prometheus.NewDesc("ringlog_process_context_switches_total",
	"Context switches of every thread of the broker process, exited ones included (getrusage): voluntary (the thread blocked) or involuntary (it was preempted).",
	[]string{"kind"}, nil)

// processCollector reads getrusage at scrape time.
type processCollector struct{}

func (processCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descContextSwitches }

func (processCollector) Collect(ch chan<- prometheus.Metric) {
	u, err := procstat.Rusage()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descContextSwitches, prometheus.CounterValue, float64(u.Voluntary), "voluntary")
	ch <- prometheus.MustNewConstMetric(descContextSwitches, prometheus.CounterValue, float64(u.Involuntary), "involuntary")
}

// serveProcessCounters answers procstat.CountersPath.
func serveProcessCounters(w http.ResponseWriter, r *http.Request) {
	s, err := procstat.Self(procstat.FS{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s)
}
