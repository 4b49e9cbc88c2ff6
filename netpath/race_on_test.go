//go:build race

package netpath

// Concurrency tests run fewer rounds under the race detector.
const raceEnabled = true
