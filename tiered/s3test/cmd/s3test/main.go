// Command s3test runs the test S3 server (package s3test) as its own
// process, for integration tests that kill -9 brokers and must not take
// the object store with them, and for stopping the store (SIGTERM, or
// kill -9: every acknowledged object is already a renamed file; not
// fsynced, so it survives the process, not a machine crash) and starting
// it again on the same -addr and -dir.
//
// Once listening it prints one line to stdout (s3test.ParseReady reads
// it):
//
//	s3test endpoint=127.0.0.1:PORT bucket=NAME access_key=K secret_key=S dir=DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ringlog/ringlog/tiered/s3test"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "data directory (required)")
	bucket := flag.String("bucket", s3test.DefaultBucket, "bucket to create")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "s3test: -dir is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := s3test.Serve(ctx, s3test.Config{Addr: *addr, Dir: *dir, Bucket: *bucket}, func(s *s3test.Server) {
		fmt.Println(s3test.FormatReady(s))
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
