package harness

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads /metrics, checks it parses as the Prometheus text format,
// and returns every sample by its series text, e.g.
// `ringlog_topic_bytes_in_total{topic="t"}`.
func Scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s\n%s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("/metrics is not valid exposition text: %v", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// SumSeries adds the samples of metric name whose labels contain every
// fragment (`topic="x"`); ok is false when there is none.
func SumSeries(m map[string]float64, name string, fragments ...string) (sum float64, ok bool) {
	for series, v := range m {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		match := true
		for _, f := range fragments {
			if !strings.Contains(series, f) {
				match = false
				break
			}
		}
		if match {
			sum += v
			ok = true
		}
	}
	return sum, ok
}
