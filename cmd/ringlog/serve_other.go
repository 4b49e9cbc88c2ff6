//go:build !linux

package main

import "github.com/urfave/cli/v2"

// serveCommand: the broker runs on Linux only (see unsupportedServe).
func serveCommand() *cli.Command { return unsupportedServe() }

// devClusterCommand: dev cluster runs serve child processes, so it is
// Linux-only too.
func devClusterCommand() *cli.Command {
	c := unsupportedServe()
	c.Name = "cluster"
	c.Usage = "run an N-node cluster on 127.0.0.1 (Linux only)"
	return c
}

// devJoinCommand: dev join runs a serve child process; Linux-only.
func devJoinCommand() *cli.Command {
	c := unsupportedServe()
	c.Name = "join"
	c.Usage = "start one more broker joining a dev cluster (Linux only)"
	return c
}

// devS3Command: the test S3 server belongs to the Linux dev tooling
// (dev cluster --object-store); Linux-only like it.
func devS3Command() *cli.Command {
	c := unsupportedServe()
	c.Name = "s3"
	c.Usage = "run the test S3 server on loopback (Linux only)"
	return c
}
