//go:build !race

package netpath

const raceEnabled = false
