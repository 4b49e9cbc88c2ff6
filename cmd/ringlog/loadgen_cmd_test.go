package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/loadgen"
	"github.com/ringlog/ringlog/results"
	"github.com/urfave/cli/v2"
)

// TestClientFlagsHaveEnvVars: every flag of the client-side commands is
// also readable from RINGLOG_<FLAG>, as serve's are.
func TestClientFlagsHaveEnvVars(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := path + " " + c.Name
			for _, f := range c.Flags {
				flag := f.Names()[0]
				df, ok := f.(cli.DocGenerationFlag)
				if !ok {
					t.Errorf("%s --%s (%T) cannot report its environment variables", name, flag, f)
					continue
				}
				want := "RINGLOG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
				if !reflect.DeepEqual(df.GetEnvVars(), []string{want}) {
					t.Errorf("%s --%s: EnvVars %v, want [%s]", name, flag, df.GetEnvVars(), want)
				}
			}
			walk(name, c.Subcommands)
		}
	}
	cmds := []*cli.Command{loadgenCommand(), benchCommand(), sizeCommand(), reportCommand(), floorCommand()}
	walk("ringlog", cmds)
	if n := len(cmds[0].Flags); n < 40 {
		t.Fatalf("loadgen has only %d flags", n)
	}
}

// runApp runs one client command in-process; urfave/cli's exit on
// cli.Exit errors is disabled so the test sees the status.
func runApp(t *testing.T, cmd *cli.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Commands: []*cli.Command{cmd}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"ringlog", cmd.Name}, args...))
	return out.String(), err
}

func exitStatus(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

// parseLoadgen parses loadgen's flags into the Options the command hands
// package loadgen, without running anything.
func parseLoadgen(t *testing.T, args ...string) (loadgen.Options, error) {
	t.Helper()
	cmd := loadgenCommand()
	var o loadgen.Options
	var perr error
	cmd.Action = func(c *cli.Context) error { o, perr = loadgenOptions(c); return nil }
	if _, err := runApp(t, cmd, args...); err != nil {
		return o, err
	}
	return o, perr
}

// TestLoadgenFlags: the flags, and their RINGLOG_* variables, land in the
// Options fields they name; unset flags keep loadgen's defaults.
func TestLoadgenFlags(t *testing.T) {
	o, err := parseLoadgen(t, "--bootstrap", "a:1,b:2", "--topic", "t1", "--topic-config", "min.insync.replicas=2",
		"--acks", "1", "--compression", "zstd", "--retry-backoff", "20ms", "--retry-backoff-max", "300ms", "--retries", "7",
		"--delivery-timeout", "4s", "--find-max", "--find-max-steps", "5", "--null-sink", "--null-sink-error", "56",
		"--out", "dir", "--start-at", "2026-01-02T03:04:05Z", "--profile-broker", "h:1", "--perf")
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if !reflect.DeepEqual(c.Bootstrap, []string{"a:1", "b:2"}) || c.Topic != "t1" || c.TopicConfigs["min.insync.replicas"] != "2" ||
		c.Acks != 1 || c.Compression.String() != "zstd" || c.RetryBackoff != 20*time.Millisecond || c.RetryBackoffMax != 300*time.Millisecond ||
		c.Retries != 7 || c.DeliveryTimeout != 4*time.Second || !c.StartAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		!reflect.DeepEqual(c.ProfileBrokers, []string{"h:1"}) || !c.Perf {
		t.Fatalf("config from flags: %+v", c)
	}
	if !o.FindMax || o.FindMaxSteps != 5 || !o.NullSink || o.NullSinkError != "56" || o.Out != "dir" {
		t.Fatalf("options from flags: %+v", o)
	}
	d := loadgen.DefaultOptions()
	if o.FindMaxPrecision != d.FindMaxPrecision || o.FindMaxRetries != d.FindMaxRetries || c.Rate != d.Config.Rate ||
		c.MessageSize != d.Config.MessageSize || c.PerfFreq != d.Config.PerfFreq || c.Linger != d.Config.Linger {
		t.Fatalf("unset flags lost loadgen's defaults: %+v", o)
	}
	t.Setenv("RINGLOG_RATE", "1234")
	t.Setenv("RINGLOG_TOPIC_CONFIG", "retention.ms=1000")
	if o, err = parseLoadgen(t); err != nil || o.Config.Rate != 1234 || o.Config.TopicConfigs["retention.ms"] != "1000" {
		t.Fatalf("from the environment: rate %v, topic configs %v, %v", o.Config.Rate, o.Config.TopicConfigs, err)
	}
	if _, err := parseLoadgen(t, "--topic-config", "novalue"); err == nil || !strings.Contains(err.Error(), "want key=value") {
		t.Fatalf("--topic-config without =: %v", err)
	}
}

// TestLoadgenSecurityFlags parses the security flags, the password from
// the environment, and refuses bad combinations with exit status 2.
func TestLoadgenSecurityFlags(t *testing.T) {
	t.Run("flags", func(t *testing.T) {
		t.Setenv("RINGLOG_SASL_PASSWORD", "wonder land")
		o, err := parseLoadgen(t, "--tls-ca", "ca.pem", "--tls-server-name", "kafka.internal", "--sasl-user", "alice")
		if err != nil {
			t.Fatal(err)
		}
		want := loadgen.Security{TLSCA: "ca.pem", TLSServerName: "kafka.internal", SASLUser: "alice", SASLPassword: "wonder land"}
		if o.Config.Security != want || o.Config.Security.Mechanism() != "SCRAM-SHA-512" {
			t.Fatalf("parsed %#v (password %q)", o.Config.Security, o.Config.Security.SASLPassword)
		}
	})
	t.Run("environment", func(t *testing.T) { // t.Setenv lasts until the subtest ends
		for k, v := range map[string]string{"RINGLOG_TLS": "true", "RINGLOG_SASL_MECHANISM": "PLAIN", "RINGLOG_SASL_USER": "bob", "RINGLOG_SASL_PASSWORD": "x"} {
			t.Setenv(k, v)
		}
		o, err := parseLoadgen(t)
		if s := o.Config.Security; err != nil || !s.TLS || s.Mechanism() != "PLAIN" || s.SASLUser != "bob" {
			t.Fatalf("from the environment: %#v, %v", s, err)
		}
	})

	// The command itself: a validation error exits 2 before any
	// connection, and PLAIN without TLS warns.
	out, err := runApp(t, loadgenCommand(), "--tls-cert", "c.pem")
	if exitStatus(err) != 2 || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("loadgen --tls-cert alone: %v\n%s", err, out)
	}
	t.Setenv("RINGLOG_SASL_PASSWORD", "x")
	out, err = runApp(t, loadgenCommand(), "--null-sink", "--sasl-mechanism", "PLAIN", "--sasl-user", "bob")
	if !strings.Contains(out, "warning: SASL PLAIN without TLS") {
		t.Errorf("no PLAIN warning:\n%s", out)
	}
	if exitStatus(err) != 2 || !strings.Contains(err.Error(), "null-sink") {
		t.Fatalf("--null-sink with SASL: %v", err)
	}
}

// TestLoadgenRetryFlags runs the command against the in-process null
// sink: the retry flags reach the run (result.json records them), bad
// values and combinations exit 2.
func TestLoadgenRetryFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	base := []string{"--null-sink", "--rate", "1000", "--duration", "500ms", "--warmup", "0s", "--out", out, "--quiet"}
	_, err := runApp(t, loadgenCommand(), append(base, "--retry-backoff", "20ms", "--retry-backoff-max", "10ms")...)
	if exitStatus(err) != 2 || !strings.Contains(err.Error(), "retry-backoff-max 10ms must be at least retry-backoff 20ms") {
		t.Fatalf("bad backoff: %v", err)
	}
	if stdout, err := runApp(t, loadgenCommand(), append(base, "--retry-backoff", "20ms", "--retry-backoff-max", "300ms",
		"--retries", "7", "--delivery-timeout", "4s")...); err != nil || !strings.Contains(stdout, "SLA ") {
		t.Fatalf("%v\n%s", err, stdout)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if w := res.Workload; w["retry_backoff"] != "20ms" || w["retry_backoff_max"] != "300ms" || w["retries"] != "7" || w["delivery_timeout"] != "4s" {
		t.Fatalf("workload %v lacks the retry flags", w)
	}
	if res.MessagesAcked != 500 || res.Errors != 0 {
		t.Fatalf("null sink run: acked %d, errors %d", res.MessagesAcked, res.Errors)
	}
	if _, err := runApp(t, loadgenCommand(), "--null-sink-error", "56"); exitStatus(err) != 2 || !strings.Contains(err.Error(), "needs --null-sink") {
		t.Fatalf("--null-sink-error without --null-sink: %v", err)
	}
	if _, err := runApp(t, loadgenCommand(), "--acks", "2"); exitStatus(err) != 2 {
		t.Fatalf("--acks 2: %v", err)
	}
	if _, err := runApp(t, sizeCommand(), "--copies", "0"); exitStatus(err) != 2 {
		t.Fatalf("size --copies 0: %v", err)
	}
	if _, err := runApp(t, benchCommand(), "--brokers", "10"); exitStatus(err) != 2 || !strings.Contains(err.Error(), "want 1..9") {
		t.Fatalf("bench --brokers 10: %v", err)
	}
}

// TestReportCommands runs the binary: two null-sink loadgen runs, then
// `report`, `report merge`, `report compare` (twice: it says where it
// wrote, then that it replaced the page) and `report html` on their
// directories, and the usage errors (exit status 2).
func TestReportCommands(t *testing.T) {
	ctx := harness.Context(t, 2*time.Minute)
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, harness.RinglogBin, args...).CombinedOutput()
		return string(out), err
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if out, err := run("loadgen", "--null-sink", "--rate", "2000", "--duration", "1s", "--warmup", "0s", "--quiet",
			"--out", d, "--label", filepath.Base(d)); err != nil {
			t.Fatalf("loadgen: %v\n%s", err, out)
		}
	}
	out, err := run("report", "--top", "3", a)
	if err != nil || !strings.Contains(out, "SLA ") || !strings.Contains(out, "2000") {
		t.Fatalf("report: %v\n%s", err, out)
	}
	merged := filepath.Join(dir, "m")
	if out, err = run("report", "merge", "--out", merged, "--label", "both", a, b); err != nil {
		t.Fatalf("report merge: %v\n%s", err, out)
	}
	m, err := results.ReadJSON(merged)
	if err != nil || m.Label != "both" || m.MessagesAcked != 4000 || len(m.MergedFrom) != 2 {
		t.Fatalf("merged result: %v %+v", err, m)
	}
	html := filepath.Join(dir, "cmp.html")
	out, err = run("report", "compare", "--html", html, a, b)
	// Every column is named (the corner too), and the last line says where the page went.
	if f := strings.Fields(out); err != nil || len(f) < 3 || f[0] != "run" || f[1] != "a" || f[2] != "b" ||
		!strings.HasSuffix(out, "wrote comparison page: "+html+"\n") {
		t.Fatalf("report compare: %v\n%s", err, out)
	}
	// A second compare says it replaced the first one's page.
	if out, err = run("report", "compare", "--html", html, a, b); err != nil || !strings.HasSuffix(out, "overwrote the earlier comparison page: "+html+"\n") {
		t.Fatalf("report compare again: %v\n%s", err, out)
	}
	// report html writes report.html again, saying where.
	if out, err = run("report", "html", a); err != nil || out != "overwrote the earlier report page: "+filepath.Join(a, results.HTMLFile)+"\n" {
		t.Fatalf("report html: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"report"}, {"report", "compare"}, {"report", "merge", "--out", merged}, {"report", "html"}} {
		out, err := run(args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit status 2\n%s", args, err, out)
		}
	}
}

// TestLoadgenKeysAndPartitionsFlags: keys default to auto (keyed over
// every partition), --keys 0 is null keys, and --partitions takes one
// count or a comma list (a sweep); bad values are refused.
func TestLoadgenKeysAndPartitionsFlags(t *testing.T) {
	o, err := parseLoadgen(t)
	if err != nil || o.Config.Keys != loadgen.KeysAuto || len(o.Sweep) != 1 || o.Config.Partitions != loadgen.DefaultConfig().Partitions {
		t.Fatalf("defaults: keys %d, sweep %v, partitions %d, %v", o.Config.Keys, o.Sweep, o.Config.Partitions, err)
	}
	o, err = parseLoadgen(t, "--keys", "0", "--partitions", "8,64,256")
	if err != nil || o.Config.Keys != 0 || !reflect.DeepEqual(o.Sweep, []int32{8, 64, 256}) || o.Config.Partitions != 8 {
		t.Fatalf("--keys 0 --partitions 8,64,256: keys %d, sweep %v, partitions %d, %v", o.Config.Keys, o.Sweep, o.Config.Partitions, err)
	}
	if o.Validate() != nil {
		t.Fatalf("sweep options invalid: %v", o.Validate())
	}
	for _, args := range [][]string{{"--keys", "many"}, {"--keys", "-2"}, {"--partitions", "8,x"}, {"--partitions", "0"}} {
		if _, err := parseLoadgen(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	o, _ = parseLoadgen(t, "--partitions", "8,64", "--find-max")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "sweep") {
		t.Fatalf("sweep with --find-max: %v", err)
	}
}

// TestLoadgenWorkloadFlags: --workload sets the run from an OMB file;
// flags given explicitly override it, flags left at their defaults do
// not; producerRate 0 becomes a find-max search unless --rate is given.
func TestLoadgenWorkloadFlags(t *testing.T) {
	const file = "testdata/omb-1-topic-16-partitions-1kb.yaml"
	o, err := parseLoadgen(t, "--workload", file)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Label != "1 producer / 2 consumers on 1 topic" || c.Partitions != 16 || c.MessageSize != 1024 || c.Rate != 50000 ||
		c.ConsumerGroups != 1 || c.Consumers != 2 || c.Producers != 1 || c.Duration != 15*time.Minute || c.Warmup != time.Minute ||
		c.Keys != loadgen.KeysAuto || c.RandomPayloads != 1000 || c.RandomBytesRatio != 0.5 || o.FindMax {
		t.Fatalf("config from the workload: %+v", c)
	}
	if o.Sweep[0] != 16 || len(o.Sweep) != 1 {
		t.Errorf("sweep %v, want the file's partitions", o.Sweep)
	}
	o, err = parseLoadgen(t, "--workload", file, "--duration", "3s", "--warmup", "1s", "--rate", "2000",
		"--partitions", "4", "--label", "mine", "--consumers", "3", "--acks", "1")
	if err != nil {
		t.Fatal(err)
	}
	c = o.Config
	if c.Duration != 3*time.Second || c.Warmup != time.Second || c.Rate != 2000 || c.Partitions != 4 || c.Label != "mine" ||
		c.Consumers != 3 || c.Acks != 1 || c.ConsumerGroups != 1 || c.MessageSize != 1024 {
		t.Fatalf("explicit flags over the workload: %+v", c)
	}
	if c.WorkloadValues["omb.testDurationMinutes"] != "15" {
		t.Errorf("the file's own values are not recorded: %v", c.WorkloadValues)
	}
	dir := t.TempDir()
	maxRate := filepath.Join(dir, "max.yaml")
	if err := os.WriteFile(maxRate, []byte("name: max\nproducerRate: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err = parseLoadgen(t, "--workload", maxRate); err != nil || !o.FindMax {
		t.Errorf("producerRate 0: find-max %v, %v", o.FindMax, err)
	}
	if o, err = parseLoadgen(t, "--workload", maxRate, "--rate", "5000"); err != nil || o.FindMax || o.Config.Rate != 5000 {
		t.Errorf("producerRate 0 with --rate: find-max %v rate %v, %v", o.FindMax, o.Config.Rate, err)
	}
	if _, err := parseLoadgen(t, "--workload", "testdata/omb-unsupported-topics.yaml"); err == nil || !strings.Contains(err.Error(), "field topics") {
		t.Errorf("unsupported field: %v", err)
	}
}

// TestLoadgenBrokerCounterFlags: --broker-pid and --broker-admin are
// repeatable (and comma lists, also from RINGLOG_*); the first admin
// address still feeds the environment. A run with --broker-pid (here this
// test process, behind the null sink) reports that process's CPU and
// context switches per acknowledged message; a pid that is no process
// fails before the run.
func TestLoadgenBrokerCounterFlags(t *testing.T) {
	o, err := parseLoadgen(t, "--broker-pid", "11", "--broker-pid", "12,13", "--broker-admin", "h:1,h:2", "--broker-admin", "http://h:3")
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if !reflect.DeepEqual(c.BrokerPIDs, []int{11, 12, 13}) || !reflect.DeepEqual(c.CounterAdmins, []string{"h:1", "h:2", "http://h:3"}) || c.BrokerAdmin != "h:1" {
		t.Fatalf("pids %v, admins %v, environment from %q", c.BrokerPIDs, c.CounterAdmins, c.BrokerAdmin)
	}
	t.Setenv("RINGLOG_BROKER_PID", "21,22")
	t.Setenv("RINGLOG_BROKER_ADMIN", "e:1")
	if o, err = parseLoadgen(t); err != nil || !reflect.DeepEqual(o.Config.BrokerPIDs, []int{21, 22}) || o.Config.BrokerAdmin != "e:1" {
		t.Fatalf("from the environment: %v %q %v", o.Config.BrokerPIDs, o.Config.BrokerAdmin, err)
	}
	t.Setenv("RINGLOG_BROKER_PID", "")
	t.Setenv("RINGLOG_BROKER_ADMIN", "")

	out := filepath.Join(t.TempDir(), "run")
	self := strconv.Itoa(os.Getpid())
	text, err := runApp(t, loadgenCommand(), "--null-sink", "--rate", "2000", "--duration", "500ms", "--warmup", "100ms", "--quiet",
		"--out", out, "--broker-pid", self)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	b := res.BrokerCPU
	if b == nil || len(b.Brokers) != 1 || b.Brokers[0].PID != os.Getpid() || b.CPUMicrosPerMsg <= 0 || b.CtxSwitches == nil ||
		b.CtxSwitches.PerMsg <= 0 || !b.SameHost || res.GeneratorCPU == nil || res.GeneratorCPU.Seconds <= 0 {
		t.Fatalf("broker_cpu %+v generator_cpu %+v\n%s", b, res.GeneratorCPU, text)
	}
	if !strings.Contains(text, "per acked msg") {
		t.Fatalf("summary lacks the cost per message:\n%s", text)
	}
	text, err = runApp(t, loadgenCommand(), "--null-sink", "--duration", "500ms", "--broker-pid", "1073741824")
	if err == nil || !strings.Contains(err.Error()+text, "no such process") {
		t.Fatalf("missing pid: %v\n%s", err, text)
	}
	if _, err = runApp(t, loadgenCommand(), "--null-sink", "--broker-pid", "0"); exitStatus(err) != 2 {
		t.Fatalf("--broker-pid 0: %v", err)
	}
}
