package broker

import "testing"

func TestCountISRChange(t *testing.T) {
	var m isrCounters
	m.count([]int32{1, 2, 3}, []int32{1, 2, 3}) // unchanged
	m.count([]int32{1, 2, 3}, []int32{1, 3})    // shrink
	m.count([]int32{1, 3}, []int32{3, 1, 2})    // expand
	m.count([]int32{1, 2}, []int32{1, 3})       // both
	if s, e := m.shrinks.Load(), m.expands.Load(); s != 2 || e != 2 {
		t.Fatalf("shrinks %d expands %d, want 2 and 2", s, e)
	}
}
