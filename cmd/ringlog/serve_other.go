//go:build !linux

package main

import "github.com/urfave/cli/v2"

// serveCommand: the broker runs on Linux only (see unsupportedServe).
func serveCommand() *cli.Command { return unsupportedServe() }
