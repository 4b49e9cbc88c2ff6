//go:build race

package engine

// raceEnabled: the race detector is on (raw system calls bypass its
// annotations, so the instrumented calls are used instead).
const raceEnabled = true
