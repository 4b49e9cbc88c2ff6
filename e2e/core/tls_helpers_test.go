package core

// fetchBytes returns ringlog_fetch_bytes_total for a listener and path.
func fetchBytes(m map[string]float64, listener, path string) float64 {
	if path == "zero-copy" {
		return fetchBytes(m, listener, "sendfile") + fetchBytes(m, listener, "splice")
	}
	return m[`ringlog_fetch_bytes_total{listener="`+listener+`",path="`+path+`"}`]
}
