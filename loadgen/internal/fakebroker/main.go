// Command fakebroker is a stand-in broker for loadgen's process-level tests
// and the in-memory baseline of benchmarks: a one-node kfake cluster
// started with the same flags as `ringlog serve`, so tests can switch to
// the real binary via RINGLOG_TEST_BROKER_BIN, and `ringlog bench
// --brokers 1 --broker-bin bin/fakebroker` runs the same workload against
// franz-go's kfake. It reads --listen and --admin-listen and ignores every
// other serve flag (kfake keeps data in memory and never syncs).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: fakebroker serve --listen HOST:PORT [--data-dir DIR] [--admin-listen HOST:PORT]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9092", "Kafka listener")
	admin := fs.String("admin-listen", "", "HTTP admin listener serving /healthz")
	fs.Parse(knownFlags(fs, os.Args[2:]))

	_, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	port, _ := strconv.Atoi(portStr)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port)}
	if os.Getenv("FAKEBROKER_DEBUG") != "" {
		opts = append(opts, kfake.WithLogger(kfake.BasicLogger(os.Stderr, kfake.LogLevelDebug)))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	if *admin != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"io_path":"kfake-memory","fsync":"none","version":"fakebroker"}`)
		})
		go http.ListenAndServe(*admin, mux)
	}
	fmt.Println("fakebroker listening on", c.ListenAddrs())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
}

// knownFlags drops the arguments of flags fs does not define, so any
// `ringlog serve` command line is accepted. An unknown flag without "="
// takes the next argument as its value unless that is a flag too.
func knownFlags(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || fs.Lookup(name) != nil {
			out = append(out, a)
			continue
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
		}
	}
	return out
}
