// Package testwait is how the unit tests wait for a condition instead of
// sleeping: Until and For poll a condition with a deadline, Holds shows
// for a stated time that something does not happen.
package testwait

import (
	"testing"
	"time"
)

// The intervals at which Until looks again: from firstPoll, doubling up to
// maxPoll, so a condition that comes true at once is seen at once and a
// slow one (a process to run, a /proc read) is not spun on.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// holdsEvery is how often Holds looks at its condition.
const holdsEvery = 2 * time.Millisecond

// Until calls cond until it returns true or limit has passed, and reports
// whether it came true. cond is called once more after the limit, so a
// false answer means it was false at or after the deadline. cond runs on
// the caller's goroutine: it may call t.Fatal, and may keep what it saw
// for the caller's failure message.
func Until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	wait := firstPoll
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		<-timer.C
		wait = min(2*wait, maxPoll)
		timer.Reset(wait)
	}
}

// For is Until that fails t, naming what it waited for, when cond did not
// come true within limit.
func For(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(limit, cond) {
		t.Fatalf("timed out after %v waiting for %s", limit, what)
	}
}

// Holds calls cond every 2 ms for d and reports whether it held at every
// call; it returns false at the first call that did not. It is how a test
// shows that something does not happen: the caller says why d is long
// enough that it would have happened.
func Holds(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	tick := time.NewTicker(holdsEvery)
	defer tick.Stop()
	for {
		if !cond() {
			return false
		}
		if !time.Now().Before(end) {
			return true
		}
		<-tick.C
	}
}
