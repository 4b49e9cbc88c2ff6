package replication

import (
	"testing"

	"github.com/ringlog/ringlog/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
