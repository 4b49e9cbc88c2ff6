package main

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/controller"
)

// TestServeDefaultsAreBrokerDefaults: serve without flags configures the
// broker exactly as broker.DefaultConfig does, so a default changed there
// is the one serve uses and --help shows.
func TestServeDefaultsAreBrokerDefaults(t *testing.T) {
	unsetServeEnv(t)
	got, err := parseServeArgs([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	want := broker.DefaultConfig()
	// Set by serve on top of the defaults: not configuration values.
	got.Logger, got.AdminHandlers, got.Version, got.Commit = nil, nil, want.Version, want.Commit
	// The flag parser hands back empty string lists where the defaults
	// have none.
	for _, l := range []*[]string{&got.Wire.Security.SASLListeners, &got.Wire.Security.SuperUsers} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if !reflect.DeepEqual(got, want) {
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		var diff []string
		for i := range gv.NumField() {
			if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
				diff = append(diff, gv.Type().Field(i).Name)
			}
		}
		t.Fatalf("serve's defaults differ from broker.DefaultConfig in %v:\n got %+v\nwant %+v", diff, got, want)
	}
}

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

// unsetServeEnv hides the RINGLOG_* variables of serve's flags from the
// test (the suite sets RINGLOG_IO, say); they come back after it.
func unsetServeEnv(t *testing.T) {
	for _, f := range serveCommand().Flags {
		vars := env(f.Names()[0])
		// Flags read other variables too (AWS_* for the object store).
		if ef, ok := f.(interface{ GetEnvVars() []string }); ok {
			vars = append(vars, ef.GetEnvVars()...)
		}
		for _, e := range vars {
			t.Setenv(e, "")
			os.Unsetenv(e)
		}
	}
}

// TestServeConsumerGroupFlags: the KIP-848 flags reach group.Config (also
// through dev cluster's pass-through), and bad values are refused naming
// the flag.
func TestServeConsumerGroupFlags(t *testing.T) {
	unsetServeEnv(t)
	nd := &devNode{id: 1, kafka: "127.0.0.1:19092", admin: "127.0.0.1:19644", ctrl: "127.0.0.1:19192", dataDirPath: "/tmp/dev/node-1/data"}
	cfg, err := parseServeArgs(nd.serveArgs([]string{"1@127.0.0.1:19192"}, []string{
		"--group-consumer-session-timeout", "6s", "--group-consumer-heartbeat-interval", "1s",
		"--group-consumer-max-size", "10", "--group-consumer-assignors", "range,uniform",
		"--group-consumer-migration-policy", "upgrade"}))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Groups
	if g.ConsumerSessionTimeout != 6*time.Second || g.ConsumerHeartbeatInterval != time.Second || g.ConsumerMaxSize != 10 ||
		!slices.Equal(g.ConsumerAssignors, []string{"range", "uniform"}) || g.MigrationPolicy != "upgrade" {
		t.Fatalf("group config %+v", g)
	}
	for _, args := range [][]string{
		{"--group-consumer-heartbeat-interval", "50s"},
		{"--group-consumer-session-timeout", "0s"},
		{"--group-consumer-max-size", "0"},
		{"--group-consumer-assignors", "sticky"},
		{"--group-consumer-assignors", ""},
		{"--group-consumer-migration-policy", "sideways"},
	} {
		_, err := parseServeArgs(append([]string{"serve"}, args...))
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: error %v does not name the flag", args, err)
		}
	}
}
