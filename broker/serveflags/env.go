// Package serveflags is `ringlog serve`'s command line: its flags and the
// broker.Config they build. The binary's serve command and the end-to-end
// harness's in-process brokers (e2e/harness) both parse through it, so a
// broker started from the same arguments is configured the same either
// way.
//
// The broker runs on Linux only; on other systems the package holds just
// the naming conventions the client commands share (EnvVars) and
// DefaultGCPercent.
package serveflags

import "strings"

// EnvVars returns the environment variable names for a flag: every flag
// of every ringlog command is also readable from RINGLOG_<NAME>, dashes as
// underscores.
func EnvVars(flag string) []string {
	return []string{"RINGLOG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

// DefaultGCPercent is --gc-percent's default, and the GC target the binary
// sets for every command: the broker's live heap is small (metadata,
// indexes, producer state) next to the request bodies that pass through
// it, so a collection every 100% of growth ran many times a second under
// load. Request memory stays bounded by --queued-max-request-bytes either
// way.
const DefaultGCPercent = 400
