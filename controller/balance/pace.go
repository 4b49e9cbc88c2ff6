package balance

import "slices"

// Pacing a plan: a broker that receives or gives up many replicas at once
// starts all their copies in one round (log creation, follower fetchers,
// the first fetches of every new replica), and moves that complete
// together move leaderships together. Producers see both as latency
// spikes. Starting at most a few moves per broker at a time, as Cruise
// Control does (its concurrent partition movements per broker), turns one
// spike into small ones spread over the move; the throttle bounds the
// bytes either way.

// Involved returns the brokers a move works on: those it adds a replica to
// or removes one from, and the new preferred leader when it changes (a
// pure reorder copies nothing, but its election moves a leadership there).
func (m Move) Involved() []int32 {
	var out []int32
	add := func(b int32) {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	for _, b := range m.To {
		if !slices.Contains(m.From, b) {
			add(b)
		}
	}
	for _, b := range m.From {
		if !slices.Contains(m.To, b) {
			add(b)
		}
	}
	if len(m.To) > 0 && (len(m.From) == 0 || m.To[0] != m.From[0]) {
		add(m.To[0])
	}
	return out
}

// Busy counts, per broker, the moves in progress that involve it.
type Busy map[int32]int

// Add counts the brokers of one move in progress.
func (b Busy) Add(brokers []int32) {
	for _, id := range brokers {
		b[id]++
	}
}

// NextWave takes, in plan order, the pending moves whose brokers all have
// fewer than limit moves in progress (counting the moves it takes), and
// returns them and the moves left waiting. busy is updated with the moves
// taken. limit <= 0 takes everything; a move involving no broker always
// fits. With nothing in progress the first pending move always fits, so
// a paced plan cannot stall.
func NextWave(pending []Move, busy Busy, limit int) (wave, rest []Move) {
	if limit <= 0 {
		return pending, nil
	}
	for _, m := range pending {
		inv := m.Involved()
		fits := true
		for _, b := range inv {
			if busy[b] >= limit {
				fits = false
				break
			}
		}
		if !fits {
			rest = append(rest, m)
			continue
		}
		busy.Add(inv)
		wave = append(wave, m)
	}
	return wave, rest
}
