package main

import (
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestDevClusterVoters: --voters N makes nodes 1..N the controller quorum
// and the others brokers that join it with their own controller address;
// dev join reads the same quorum back from cluster.json.
func TestDevClusterVoters(t *testing.T) {
	layout := func(args ...string) (devLayout, error) {
		var l devLayout
		var lerr error
		cmd := devClusterCommand()
		cmd.Action = func(c *cli.Context) error {
			l, lerr = devClusterLayout(c)
			return nil
		}
		app := &cli.App{Name: "ringlog", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
		if err := app.Run(append([]string{"ringlog", "cluster"}, args...)); err != nil {
			return l, err
		}
		return l, lerr
	}
	l, err := layout("--nodes", "3")
	if err != nil || !slices.Equal(l.Voters, []string{"1@127.0.0.1:9192", "2@127.0.0.1:9193", "3@127.0.0.1:9194"}) {
		t.Fatalf("default: %+v %v", l, err)
	}
	l, err = layout("--nodes", "4", "--voters", "3", "--controller-port", "7000", "--", "--io", "sync")
	if err != nil || !slices.Equal(l.Voters, []string{"1@127.0.0.1:7000", "2@127.0.0.1:7001", "3@127.0.0.1:7002"}) || !slices.Equal(l.Extra, []string{"--io", "sync"}) {
		t.Fatalf("--voters 3 of 4: %+v %v", l, err)
	}
	// Node 4 is a broker: not among the voters, with a controller address
	// of its own, and its command line parses as serve's.
	args := l.node("/d", 4).serveArgs(l.Voters, l.Extra)
	if i := slices.Index(args, "--controller-listen"); i < 0 || args[i+1] != "127.0.0.1:7003" {
		t.Fatalf("node 4 args %v", args)
	}
	if err := checkServeArgs(args); err != nil {
		t.Fatalf("node 4 args %v: %v", args, err)
	}
	// The layout survives the trip through cluster.json.
	js, _ := json.Marshal(l)
	var back devLayout
	if err := json.Unmarshal(js, &back); err != nil || !slices.Equal(back.Voters, l.Voters) || back.ControllerPort != 7000 || back.Nodes != 4 {
		t.Fatalf("cluster.json round trip: %+v %v", back, err)
	}
	for _, bad := range [][]string{{"--nodes", "3", "--voters", "4"}, {"--nodes", "3", "--voters", "-1"}, {"--nodes", "10"}} {
		if _, err := layout(bad...); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}
