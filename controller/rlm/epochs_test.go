package rlm

import (
	"reflect"
	"testing"

	"github.com/ringlog/ringlog/engine/epochcache"
)

func TestEpochsRoundTrip(t *testing.T) {
	for _, in := range [][]epochcache.Entry{nil, {{Epoch: 0, StartOffset: 0}}, {{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 100}, {Epoch: 7, StartOffset: 100}, {Epoch: 9, StartOffset: 5000}}} {
		out, err := DecodeEpochs(EncodeEpochs(in))
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		if len(in) == 0 && len(out) == 0 {
			continue
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip: %v -> %v", in, out)
		}
	}
}

func TestEpochsRefusesDamage(t *testing.T) {
	for _, bad := range []string{
		"", "rlm-epochs 2\n0\n", "rlm-epochs 1\n", "rlm-epochs 1\n-1\n", "rlm-epochs 1\n2\n0 0\n",
		"rlm-epochs 1\n1\n0\n", "rlm-epochs 1\n2\n3 10\n2 20\n", "rlm-epochs 1\n2\n3 10\n4 5\n",
		"rlm-epochs 1\n1\n0 0\n1 1\n", "rlm-epochs 1\n1\nx 0\n", "rlm-epochs 1\n99999999999\n",
	} {
		if _, err := DecodeEpochs([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
