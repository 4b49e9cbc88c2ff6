package main

import (
	"testing"

	"github.com/ringlog/ringlog/e2e/harness"
)

// The binary's own tests start it too (flags, environment, dev cluster).
func TestMain(m *testing.M) { harness.Main(m) }
