package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/broker/serveflags"
	"github.com/ringlog/ringlog/controller"
)

// TestDevClusterNodeArgs: the command line dev cluster renders for a node
// configures that node (serve's own parser reads it back), and a bad
// extra flag is caught before any node starts.
func TestDevClusterNodeArgs(t *testing.T) {
	unsetServeEnv(t)
	nd := &devNode{id: 2, kafka: "127.0.0.1:19093", admin: "127.0.0.1:19645", ctrl: "127.0.0.1:19193", dataDirPath: "/tmp/dev/node-2/data"}
	voters := []string{"1@127.0.0.1:19192", "2@127.0.0.1:19193"}
	cfg, err := parseServeArgs(nd.serveArgs(voters, []string{"--io", "sync", "--group-initial-rebalance-delay", "100ms"}))
	if err != nil {
		t.Fatal(err)
	}
	wantVoters := []controller.Voter{{ID: 1, Addr: "127.0.0.1:19192"}, {ID: 2, Addr: "127.0.0.1:19193"}}
	if cfg.NodeID != 2 || cfg.Listen != nd.kafka || cfg.AdminListen != nd.admin || cfg.DataDir != nd.dataDirPath ||
		cfg.Controller.ControllerListen != nd.ctrl || !slices.Equal(cfg.Controller.Voters, wantVoters) ||
		cfg.Engine.IOMode != "sync" || cfg.Groups.InitialRebalanceDelay != 100*time.Millisecond {
		t.Fatalf("node 2's config: node %d listen %s admin %s data %s controller %s voters %v io %s rebalance delay %v",
			cfg.NodeID, cfg.Listen, cfg.AdminListen, cfg.DataDir, cfg.Controller.ControllerListen, cfg.Controller.Voters,
			cfg.Engine.IOMode, cfg.Groups.InitialRebalanceDelay)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for extra, want := range map[string]string{
		"--fsync=sometimes": "--fsync",
		"--no-such-flag":    "no-such-flag",
		"--tls-cert=c.pem":  "without a TLS listener",
	} {
		if err := checkServeArgs(nd.serveArgs(voters, []string{extra})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("extra flag %s: %v, want an error naming %q", extra, err, want)
		}
	}
}

// unsetServeEnv hides the variables serve's flags read from the test (the
// suite sets RINGLOG_IO, say); they come back after it.
func unsetServeEnv(t *testing.T) {
	for _, e := range serveflags.EnvNames() {
		t.Setenv(e, "")
		os.Unsetenv(e)
	}
}
