//go:build race

package replication

// The model test is single-goroutine; under the race detector (about 15x
// slower) it runs fewer seeds so the package stays within its time budget.
const raceEnabled = true
