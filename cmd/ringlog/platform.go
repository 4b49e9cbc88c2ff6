package main

import (
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"
)

// The broker (`ringlog serve`) is built for Linux only: its write path is
// io_uring or pwrite+fdatasync, its fetch path sendfile/splice, and its
// durability argument rests on Linux's fdatasync semantics (macOS's fsync
// does not flush the drive cache). On other systems the binary is a
// client: loadgen, report, size, users, acls, example and dev certs work
// against a broker elsewhere, and serve says why it will not start.

// serveSupported: this build can run `ringlog serve`. bench and example
// offsets start it themselves and check first, so that they fail with
// errServeUnsupported rather than "broker exited before listening".
var serveSupported = runtime.GOOS == "linux"

// unsupportedServe is `ringlog serve` on systems other than Linux.
func unsupportedServe() *cli.Command {
	return &cli.Command{
		Name:            "serve",
		Usage:           "run a broker (Linux only; this build is " + runtime.GOOS + "/" + runtime.GOARCH + ")",
		SkipFlagParsing: true,
		Action: func(*cli.Context) error {
			return errServeUnsupported
		},
	}
}

var errServeUnsupported = fmt.Errorf("serve: the broker runs on Linux only (io_uring or pwrite/fdatasync writes, sendfile/splice fetch); "+
	"this is a %s/%s build: use it as a client (loadgen, report, size, users, acls) against a Linux broker", runtime.GOOS, runtime.GOARCH)
