package statelog

import (
	"math"
	"testing"
	"unicode/utf16"
)

// javaHashByHand evaluates Java's definition literally,
// s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1], with every product and
// sum wrapped to int32 (Go's int32 arithmetic wraps like Java's int).
func javaHashByHand(s string) int32 {
	units := utf16.Encode([]rune(s))
	var sum int32
	for i, u := range units {
		pow := int32(1)
		for range len(units) - 1 - i {
			pow *= 31
		}
		sum += int32(u) * pow
	}
	return sum
}

func TestPartitionForMatchesJava(t *testing.T) {
	for _, tc := range []struct {
		s    string
		hash int32 // String.hashCode() as Java prints it
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322}, // ((((104*31+101)*31+108)*31+108)*31+111)
		{"Aa", 2112},        // 65*31+97
		{"BB", 2112},        // 66*31+66: the classic collision
		{"é", 233},
		{"😀", 55357*31 + 56832}, // a surrogate pair: two UTF-16 units
		{"polygenelubricants", math.MinInt32},
	} {
		if got := JavaStringHashCode(tc.s); got != tc.hash {
			t.Errorf("hashCode(%q) = %d, want %d", tc.s, got, tc.hash)
		}
		if got := javaHashByHand(tc.s); got != tc.hash {
			t.Errorf("by hand hashCode(%q) = %d, want %d", tc.s, got, tc.hash)
		}
	}
	for _, s := range []string{"my-group", "console-consumer-12345", "practice-summary", "ÿ-ümlaut", "a-long-group-name-that-overflows-int32-many-times"} {
		h := javaHashByHand(s)
		abs := h
		if abs < 0 {
			abs = -abs
		}
		if h == math.MinInt32 {
			abs = 0 // Kafka's Utils.abs
		}
		if got, want := PartitionFor(s, 50), abs%50; got != want {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", s, got, want)
		}
	}
	if got := PartitionFor("polygenelubricants", 50); got != 0 {
		t.Errorf("MinInt32 hash must map to partition 0, got %d", got)
	}
	if got := PartitionFor("hello", 50); got != 99162322%50 {
		t.Errorf("PartitionFor(hello) = %d", got)
	}
}
