//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ringlog/ringlog/tiered/s3test"
	"github.com/urfave/cli/v2"
)

// `ringlog dev s3` runs the test S3 server (tiered/s3test: gofakes3 over
// files in --dir) in the foreground, for trying tiered storage without an
// object store of one's own. It is a development tool: it checks no
// request signatures, so it listens on loopback only.

func devS3Command() *cli.Command {
	return &cli.Command{
		Name:  "s3",
		Usage: "run an S3-compatible test object store on loopback until Ctrl-C (for --object-store-endpoint)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9000", Usage: "loopback host:port to listen on"},
			&cli.StringFlag{Name: "dir", Value: "./s3-data", Usage: "directory holding the objects (kept across restarts)"},
			&cli.StringFlag{Name: "bucket", Value: s3test.DefaultBucket, Usage: "bucket to create if missing"},
		},
		Action: func(c *cli.Context) error {
			if err := checkLoopback(c.String("listen")); err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cfg := s3test.Config{Addr: c.String("listen"), Dir: c.String("dir"), Bucket: c.String("bucket")}
			return s3test.Serve(ctx, cfg, func(s *s3test.Server) { printDevS3(c.App.Writer, s) })
		},
	}
}

// printDevS3 prints the server's ready line (s3test.ParseReady reads it)
// and the serve flags that point a broker at it.
func printDevS3(w io.Writer, s *s3test.Server) {
	fmt.Fprintln(w, s3test.FormatReady(s))
	fmt.Fprintf(w, "object store ready; start brokers with:\n  ringlog serve %s\nCtrl-C stops it\n", strings.Join(devS3ServeFlags(s), " "))
}

// devS3ServeFlags are the serve flags that point a broker at s.
func devS3ServeFlags(s *s3test.Server) []string {
	ak, sk := s.Credentials()
	return []string{
		"--object-store-endpoint", s.Endpoint(),
		"--object-store-bucket", s.Bucket(),
		"--object-store-access-key", ak,
		"--object-store-secret-key", sk,
	}
}

// startDevS3 starts the object store of `dev cluster --object-store`, its
// objects under base (kept for the next run).
func startDevS3(base string) (*s3test.Server, error) {
	return s3test.New(s3test.Config{Dir: filepath.Join(base, "object-store")})
}

// checkLoopback refuses an address that is not on a loopback interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address: the test object store checks no credentials", addr)
	}
	return nil
}
