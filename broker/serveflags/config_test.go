//go:build linux

package serveflags

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/broker"
	"github.com/urfave/cli/v2"
)

// unsetEnv hides the variables serve's flags read from the test (the
// suites set RINGLOG_IO, say); they come back after it.
func unsetEnv(t *testing.T) {
	for _, e := range EnvNames() {
		t.Setenv(e, "")
		os.Unsetenv(e)
	}
}

// TestServeDefaultsAreBrokerDefaults: serve without flags configures the
// broker exactly as broker.DefaultConfig does, so a default changed there
// is the one serve uses and --help shows.
func TestServeDefaultsAreBrokerDefaults(t *testing.T) {
	unsetEnv(t)
	got, err := Parse(nil, Options{})
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

// TestServeFlagsHaveEnvVars: the README promises that every serve flag can
// be set as RINGLOG_<FLAG>; a flag added without EnvVars breaks that
// silently.
func TestServeFlagsHaveEnvVars(t *testing.T) {
	flags := Flags(broker.DefaultConfig())
	if len(flags) < 10 {
		t.Fatalf("serve has only %d flags", len(flags))
	}
	for _, f := range flags {
		name := f.Names()[0]
		df, ok := f.(cli.DocGenerationFlag)
		if !ok {
			t.Errorf("--%s (%T) cannot report its environment variables", name, f)
			continue
		}
		want := "RINGLOG_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if !slices.Contains(df.GetEnvVars(), want) {
			t.Errorf("--%s: EnvVars %v, want %s among them", name, df.GetEnvVars(), want)
		}
	}
}

// TestServeConsumerGroupFlags: the KIP-848 flags reach group.Config, and
// bad values are refused naming the flag.
func TestServeConsumerGroupFlags(t *testing.T) {
	unsetEnv(t)
	cfg, err := Parse([]string{
		"--group-consumer-session-timeout", "6s", "--group-consumer-heartbeat-interval", "1s",
		"--group-consumer-max-size", "10", "--group-consumer-assignors", "range,uniform",
		"--group-consumer-migration-policy", "upgrade"}, Options{})
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
		_, err := Parse(args, Options{})
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: error %v does not name the flag", args, err)
		}
	}
}

// TestServeShareGroupFlags: the share group flags reach share.Config,
// their defaults are Kafka's, and bad values are refused naming the flag.
func TestServeShareGroupFlags(t *testing.T) {
	unsetEnv(t)
	cfg, err := Parse(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Shares; s.RecordLockDuration != 30*time.Second || s.DeliveryCountLimit != 5 || s.MaxRecordLocks != 2000 {
		t.Fatalf("default share config %+v", s)
	}
	cfg, err = Parse([]string{
		"--group-share-record-lock-duration", "5s", "--group-share-delivery-count-limit", "3",
		"--group-share-partition-max-record-locks", "500", "--group-share-max-sessions", "20"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Shares; s.RecordLockDuration != 5*time.Second || s.DeliveryCountLimit != 3 || s.MaxRecordLocks != 500 || s.MaxSessions != 20 {
		t.Fatalf("share config %+v", s)
	}
	for _, args := range [][]string{
		{"--group-share-record-lock-duration", "100ms"},
		{"--group-share-delivery-count-limit", "11"},
		{"--group-share-partition-max-record-locks", "10"},
		{"--group-share-max-sessions", "0"},
	} {
		_, err := Parse(args, Options{})
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: error %v does not name the flag", args, err)
		}
	}
}

func TestServeRejectsUnknownIOMode(t *testing.T) {
	if _, err := Parse([]string{"--io", "foo"}, Options{}); err == nil || !strings.Contains(err.Error(), `--io "foo": want auto, uring or sync`) {
		t.Fatalf("--io foo: %v", err)
	}
}

func TestBootstrapUserNeedsItsPassword(t *testing.T) {
	if got := BootstrapPasswordVar("ops-admin.1"); got != "RINGLOG_BOOTSTRAP_PASSWORD_OPS_ADMIN_1" {
		t.Fatalf("variable %q", got)
	}
	t.Setenv("RINGLOG_BOOTSTRAP_PASSWORD_ADMIN", "")
	if _, err := Parse([]string{"--bootstrap-user", "admin"}, Options{}); err == nil || !strings.Contains(err.Error(), "RINGLOG_BOOTSTRAP_PASSWORD_ADMIN") {
		t.Fatalf("no password: %v", err)
	}
	t.Setenv("RINGLOG_BOOTSTRAP_PASSWORD_ADMIN", "s3cret")
	cfg, err := Parse([]string{"--bootstrap-user", "admin"}, Options{})
	if err != nil || len(cfg.BootstrapUsers) != 1 || cfg.BootstrapUsers[0].Password != "s3cret" {
		t.Fatalf("cfg %+v err %v", cfg.BootstrapUsers, err)
	}
}

// TestSharedProcessOptions: a broker sharing its process refuses the
// flags that set process-wide state, logs where it is told, and reports
// the version it is given.
func TestSharedProcessOptions(t *testing.T) {
	unsetEnv(t)
	for _, f := range ProcessFlags {
		v := "1"
		if f == "block-profile-rate" {
			v = "1ms"
		}
		if _, err := Parse([]string{"--" + f, v}, Options{SharedProcess: true}); err == nil || !strings.Contains(err.Error(), "--"+f) {
			t.Errorf("--%s in a shared process: %v, want it refused", f, err)
		}
		if _, err := Parse([]string{"--" + f, v}, Options{}); err != nil {
			t.Errorf("--%s in a process of its own: %v", f, err)
		}
	}
	var log bytes.Buffer
	cfg, err := Parse([]string{"--log-format", "json"}, Options{Version: "v1", Commit: "abc", LogOutput: &log, SharedProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger.Info("hello")
	if !strings.Contains(log.String(), `"msg":"hello"`) || cfg.Version != "v1 (abc)" || cfg.Commit != "abc" {
		t.Fatalf("log %q, version %q commit %q", log.String(), cfg.Version, cfg.Commit)
	}
	if _, err := Parse([]string{"--help"}, Options{}); err == nil {
		t.Fatal("--help configured a broker")
	}
}
