package netpath

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are read from the same atomic counters /healthz uses, at scrape
// time (a prometheus.Collector of const metrics), so the request path pays
// nothing extra for them. The request latency histograms and the counters
// that only exist for /metrics are in request_metrics.go. Storage (fsync,
// io_uring) and replication series are the broker package's
// (broker/storage_metrics.go, broker/replication_metrics.go);
// docs/OBSERVABILITY.md lists every series.

var (
	descListenerInfo = prometheus.NewDesc("ringlog_listener_info",
		"Kafka listeners and the fetch path each uses (sendfile: zero-copy; copy: pread + write).",
		[]string{"listener", "fetch_path", "addr"}, nil)
	descFetchBytes = prometheus.NewDesc("ringlog_fetch_bytes_total",
		"Record bytes sent by fetch responses, by listener and by how they were sent.",
		[]string{"listener", "path"}, nil)
	descConnections = prometheus.NewDesc("ringlog_connections",
		"Open client connections.", []string{"listener"}, nil)
	descBytesIn = prometheus.NewDesc("ringlog_bytes_in_total",
		"Request bytes read, framing included.", []string{"listener"}, nil)
	descBytesOut = prometheus.NewDesc("ringlog_bytes_out_total",
		"Response bytes written, framing included.", []string{"listener"}, nil)
	descRequests = prometheus.NewDesc("ringlog_requests_total",
		"Requests received, by API.", []string{"api"}, nil)
	descRejected = prometheus.NewDesc("ringlog_rejected_frames_total",
		"Requests that closed their connection as malformed or unsupported.", nil, nil)
	descTLSErrors = prometheus.NewDesc("ringlog_tls_handshake_errors_total",
		"TLS connections dropped during the handshake.", nil, nil)
)

// Collector returns the wire server's metrics for a Prometheus registry.
func (s *Server) Collector() prometheus.Collector { return serverCollector{s} }

type serverCollector struct{ s *Server }

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descListenerInfo, descFetchBytes, descConnections, descBytesIn, descBytesOut, descRequests, descRejected, descTLSErrors} {
		ch <- d
	}
	c.s.metrics.describe(ch)
	c.s.sessions.describe(ch)
	c.s.quotas.describe(ch)
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	ls := append([]*listener(nil), s.listeners...)
	s.mu.Unlock()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, l := range ls {
		ch <- prometheus.MustNewConstMetric(descListenerInfo, prometheus.GaugeValue, 1, l.name, l.fetchPath, l.ln.Addr().String())
		// Zero copy is split by syscall: splice carries ranges of
		// spliceMinBytes and more, sendfile the rest.
		counter(descFetchBytes, l.zeroCopyBytes.Load()-l.splicedBytes.Load(), l.name, "sendfile")
		counter(descFetchBytes, l.splicedBytes.Load(), l.name, "splice")
		counter(descFetchBytes, l.copiedBytes.Load(), l.name, "copy")
		ch <- prometheus.MustNewConstMetric(descConnections, prometheus.GaugeValue, float64(l.connections.Load()), l.name)
		counter(descBytesIn, l.bytesIn.Load(), l.name)
		counter(descBytesOut, l.bytesOut.Load(), l.name)
	}
	for _, k := range registeredKeys() {
		counter(descRequests, s.stats.apiRequests[k].Load(), kmsg.NameForKey(k))
	}
	counter(descRejected, s.stats.rejectedFrames.Load())
	counter(descTLSErrors, s.stats.tlsHandshakeErrors.Load())
	s.metrics.collect(s, ch)
	s.sessions.collect(ch)
	s.quotas.collect(ch)
}
