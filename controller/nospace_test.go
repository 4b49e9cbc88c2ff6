package controller

import (
	"errors"
	"fmt"
	"testing"
)

// ErrNoSpace survives the controller RPC, so a broker forwarding a
// metadata write to a controller with a full disk can name the cause.
func TestErrNoSpaceOverTheWire(t *testing.T) {
	var resp rpcResponse
	errorToWire(fmt.Errorf("%w: bolt: write raft.db: no space left on device", ErrNoSpace), &resp)
	if err := errorFromWire(&resp); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("after the wire: %v, want ErrNoSpace", err)
	}
}
