package balance

import (
	"slices"
	"testing"
)

func TestMoveInvolved(t *testing.T) {
	for _, c := range []struct {
		m    Move
		want []int32
	}{
		{Move{From: []int32{1, 2, 3}, To: []int32{4, 2, 3}}, []int32{4, 1}},       // 1 -> 4, new leader 4
		{Move{From: []int32{1, 2, 3}, To: []int32{1, 2, 4}}, []int32{4, 3}},       // follower moves, leader kept
		{Move{From: []int32{1, 2, 3}, To: []int32{2, 1, 3}}, []int32{2}},          // reorder: only the new leader
		{Move{From: []int32{1, 2, 3}, To: []int32{1, 2, 3}}, nil},                 // nothing
		{Move{From: []int32{1, 2, 3}, To: []int32{5, 4, 3}}, []int32{5, 4, 1, 2}}, // two replicas move
	} {
		if got := c.m.Involved(); !slices.Equal(got, c.want) {
			t.Errorf("%v -> %v: involved %v, want %v", c.m.From, c.m.To, got, c.want)
		}
	}
}

// TestNextWave: a rebalance onto a new broker 4 (every move adds to it)
// runs limit moves at a time; moves on other brokers fill in around them;
// a move with no broker always goes; no limit takes everything.
func TestNextWave(t *testing.T) {
	var plan []Move
	for i := range 7 {
		plan = append(plan, Move{Topic: "t", Index: int32(i), From: []int32{1, 2, 3}, To: []int32{1, 2, 4}})
	}
	plan = append(plan, Move{Topic: "u", Index: 0, From: []int32{1, 2}, To: []int32{1, 5}})
	plan = append(plan, Move{Topic: "v", Index: 0, From: []int32{1, 2}, To: []int32{1, 2}})

	busy := Busy{}
	wave, rest := NextWave(plan, busy, 3)
	// t-0..t-2 fill broker 4 and broker 3; u-0 needs 5 and 2 (free); v-0 none.
	if names(wave) != "t0 t1 t2 u0 v0" || len(rest) != 4 {
		t.Fatalf("first wave %s, %d left", names(wave), len(rest))
	}
	if busy[4] != 3 || busy[3] != 3 || busy[5] != 1 || busy[2] != 1 {
		t.Fatalf("busy %v", busy)
	}
	// Nothing fits until moves finish.
	if w, r := NextWave(rest, busy, 3); len(w) != 0 || len(r) != 4 {
		t.Fatalf("with every slot taken: wave %s, %d left", names(w), len(r))
	}
	// Two finish: two more start, in plan order.
	busy = Busy{}
	busy.Add([]int32{4, 3})
	wave, rest = NextWave(rest, busy, 3)
	if names(wave) != "t3 t4" || names(rest) != "t5 t6" {
		t.Fatalf("second wave %s, left %s", names(wave), names(rest))
	}
	// Idle cluster: the first move fits even at limit 1.
	if w, _ := NextWave(rest, Busy{}, 1); names(w) != "t5" {
		t.Fatalf("limit 1 from idle: %s", names(w))
	}
	if w, r := NextWave(plan, Busy{}, 0); len(w) != len(plan) || len(r) != 0 {
		t.Fatalf("no limit: %d of %d taken", len(w), len(plan))
	}
}

func names(ms []Move) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += m.Topic + string(rune('0'+m.Index))
	}
	return s
}
