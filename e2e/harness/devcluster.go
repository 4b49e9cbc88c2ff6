package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// FreePortRun finds n consecutive free loopback ports (dev cluster takes a
// base port per listener kind and counts up from it).
func FreePortRun(t *testing.T, n int) int {
	t.Helper()
	for range 200 {
		base := 20000 + rand.IntN(40000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
			if _, dup := HandedOut.LoadOrStore(fmt.Sprintf("127.0.0.1:%d", p), true); dup {
				ok = false
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports")
	return 0
}
