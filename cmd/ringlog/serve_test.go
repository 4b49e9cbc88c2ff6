package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestServeFlagsHaveEnvVars: the README promises that every serve flag can
// be set as RINGLOG_<FLAG>; a flag added without EnvVars breaks that
// silently.
func TestServeFlagsHaveEnvVars(t *testing.T) {
	flags := serveCommand().Flags
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
		found := false
		for _, e := range df.GetEnvVars() {
			found = found || e == want
		}
		if !found {
			t.Errorf("--%s: EnvVars %v, want %s among them", name, df.GetEnvVars(), want)
		}
	}
}
