package harness

import (
	"strings"
)

// GrepLines returns the last max lines of log that contain s.
func GrepLines(log, s string, max int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out[len(out)-min(max, len(out)):], "\n")
}
