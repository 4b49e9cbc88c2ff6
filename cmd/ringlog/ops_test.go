package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

func TestOpsErrorNamesTheErrorAndTheWayOut(t *testing.T) {
	err := opsError("create t", withMessage(kerr.TopicAlreadyExists, `topic "t" exists`))
	want := `create t: TOPIC_ALREADY_EXISTS (topic "t" exists): pass --if-not-exists to accept an existing topic`
	if err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err, want)
	}
	// A Kafka error without a hint still gets its name.
	if err := opsError("x", kerr.InvalidFetchSize); err.Error() != "x: INVALID_FETCH_SIZE" {
		t.Fatalf("got %q", err)
	}
	if err := opsError("x", fmt.Errorf("dial tcp: connection refused")); !strings.Contains(err.Error(), "--bootstrap") {
		t.Fatalf("a refused connection should point at --bootstrap: %q", err)
	}
	if opsError("x", nil) != nil {
		t.Fatal("nil error must stay nil")
	}
}

func TestPrintRecordFormat(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}, Timestamp: time.UnixMilli(1234)}
	var b strings.Builder
	printRecord(&b, unescape(`%t/%p@%o %k=%v [%h] %T 100%% %x\n`), r)
	if want := "t/2@7 k=v [a=1,b=2] 1234 100% %x\n"; b.String() != want {
		t.Fatalf("got %q want %q", b.String(), want)
	}
}

func TestOperatorCommandsCheckArgumentsFirst(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "-p", "0", "t"}, "--partitions 0"},
		{[]string{"create", "-c", "novalue", "t"}, `--config "novalue": want key=value`},
		{[]string{"create"}, "usage: ringlog topic create"},
		{[]string{"alter-config", "t"}, "usage: ringlog topic alter-config"},
	} {
		_, err := runApp(t, topicCommand(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("topic %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := runApp(t, groupCommand(), "seek", "--to", "middle", "g"); err == nil || !strings.Contains(err.Error(), "want start, end, offset:N or timestamp:UNIX_MS") {
		t.Errorf("group seek --to middle: %v", err)
	}
	if _, err := runApp(t, consumeCommand(), "--from", "offset:-1", "t"); err == nil || !strings.Contains(err.Error(), "N >= 0") {
		t.Errorf("consume --from offset:-1: %v", err)
	}
	if _, err := runApp(t, consumeCommand(), "--group", "g", "--partition", "1", "t"); err == nil || !strings.Contains(err.Error(), "do not go together") {
		t.Errorf("consume --group --partition: %v", err)
	}
}

// Every flag's help line says its default once and has no placeholder
// taken from a backquoted phrase.
func TestHelpLinesReadOnce(t *testing.T) {
	cmds := allCommands()
	tidyHelp(cmds)
	var walk func([]*cli.Command)
	n := 0
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			for _, f := range c.Flags {
				line := f.String()
				n++
				if strings.Count(line, "(default:") > 1 || strings.Contains(line, "`") {
					t.Errorf("%s: %s", c.Name, line)
				}
				if strings.Contains(line, "e+0") {
					t.Errorf("%s: a float default in exponent form: %s", c.Name, line)
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(cmds)
	if n < 100 {
		t.Fatalf("only %d flags seen", n)
	}
}

// TestConfigValueWithCommas: a -c/--set value holding commas (a throttled
// replica list) reaches the broker whole, though the flag library splits
// it at the commas.
func TestConfigValueWithCommas(t *testing.T) {
	var got map[string]*string
	app := &cli.App{
		Flags: []cli.Flag{&cli.StringSliceFlag{Name: "set"}},
		Action: func(c *cli.Context) (err error) {
			got, err = parseKVs("set", c.StringSlice("set"))
			return err
		},
	}
	if err := app.Run([]string{"x", "--set", "follower.replication.throttled.replicas=0:2,1:3", "--set", "retention.ms=5,segment.ms=6"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"follower.replication.throttled.replicas": "0:2,1:3", "retention.ms": "5", "segment.ms": "6"}
	if len(got) != len(want) {
		t.Fatalf("got %d keys, want %v", len(got), want)
	}
	for k, v := range want {
		if got[k] == nil || *got[k] != v {
			t.Errorf("%s: got %v, want %q", k, got[k], v)
		}
	}
	if _, err := parseKVs("set", []string{"novalue", "a=1"}); err == nil {
		t.Error("a first piece without = must stay an error")
	}
}
