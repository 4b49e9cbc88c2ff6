package main

import (
	"strings"
	"testing"
)

// TestLoadgenAgentsFlags: --agents and the token (flag or environment)
// reach the Options; spaces and empty entries in the list are dropped.
func TestLoadgenAgentsFlags(t *testing.T) {
	t.Setenv("RINGLOG_AGENT_TOKEN", "from-env")
	o, err := parseLoadgen(t, "--agents", " h1:7070, h2:7070,,")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Agents, "|") != "h1:7070|h2:7070" || o.AgentToken != "from-env" {
		t.Errorf("agents %q token %q", o.Agents, o.AgentToken)
	}
	if o, _ = parseLoadgen(t, "--agents", "h1:1", "--agent-token", "flag"); o.AgentToken != "flag" {
		t.Errorf("token %q, want the flag's", o.AgentToken)
	}
}
