package core

import (
	"testing"

	"github.com/ringlog/ringlog/e2e/harness"
)

func TestMain(m *testing.M) { harness.MainInProcess(m) }
