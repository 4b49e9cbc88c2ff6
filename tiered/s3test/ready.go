package s3test

import (
	"fmt"
	"strings"
)

// Ready is what a server process (cmd/s3test, or a `ringlog dev s3`)
// announces on stdout once it listens. FormatReady and ParseReady keep
// the printer and the integration tests that read it from drifting.
type Ready struct {
	Endpoint, Bucket, AccessKey, SecretKey, Dir string
}

const readyPrefix = "s3test "

// FormatReady is the ready line for s, without a newline:
//
//	s3test endpoint=127.0.0.1:PORT bucket=NAME access_key=K secret_key=S dir=DIR
func FormatReady(s *Server) string {
	ak, sk := s.Credentials()
	return fmt.Sprintf("%sendpoint=%s bucket=%s access_key=%s secret_key=%s dir=%s", readyPrefix, s.Endpoint(), s.Bucket(), ak, sk, s.Dir())
}

// ParseReady parses a ready line; ok is false for any other line (a
// process may log before it).
func ParseReady(line string) (r Ready, ok bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, readyPrefix) {
		return r, false
	}
	fields := map[string]*string{"endpoint": &r.Endpoint, "bucket": &r.Bucket, "access_key": &r.AccessKey, "secret_key": &r.SecretKey, "dir": &r.Dir}
	// dir is last and may hold spaces: split it off first.
	rest, dir, _ := strings.Cut(strings.TrimPrefix(line, readyPrefix), " dir=")
	r.Dir = dir
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		if p, known := fields[k]; known {
			*p = v
		}
	}
	return r, r.Endpoint != "" && r.Bucket != ""
}
