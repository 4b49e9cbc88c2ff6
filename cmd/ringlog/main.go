// Command ringlog is a Kafka-compatible log broker and its benchmarking
// harness: `ringlog serve` runs a broker, `ringlog loadgen` and `ringlog
// bench` measure one, `ringlog report` reads the results and `ringlog size`
// does the capacity arithmetic.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/ringlog/ringlog/broker/serveflags"
	"github.com/ringlog/ringlog/loadgen"
	"github.com/urfave/cli/v2"
)

// Set by the Makefile with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	loadgen.Version, loadgen.Commit = version, commit // recorded in result.json
	// The load generator's clients allocate per message as the broker
	// does per request: the same GC target for every command (serve's
	// --gc-percent then sets its own), unless GOGC says otherwise.
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(serveflags.DefaultGCPercent)
	}
	app := &cli.App{
		Name:     "ringlog",
		Usage:    "Kafka-compatible replicated log broker and benchmark harness",
		Version:  fmt.Sprintf("%s (commit %s)", version, commit),
		Commands: allCommands(),
	}
	tidyHelp(app.Commands)
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "ringlog:", err)
		os.Exit(1)
	}
}

// allCommands are ringlog's commands, in the order help lists them.
func allCommands() []*cli.Command {
	return []*cli.Command{
		serveCommand(),
		devCommand(),
		exampleCommand(),
		usersCommand(),
		aclsCommand(),
		topicCommand(),
		groupCommand(),
		clusterCommand(),
		produceCommand(),
		consumeCommand(),
		adminCommand(),
		loadgenCommand(),
		benchCommand(),
		sizeCommand(),
		floorCommand(),
		reportCommand(),
	}
}

// env returns the environment variable names for a flag: every flag is
// also readable from RINGLOG_<NAME>, dashes as underscores.
var env = serveflags.EnvVars
