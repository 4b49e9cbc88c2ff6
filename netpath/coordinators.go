package netpath

import (
	"net"

	"github.com/ringlog/ringlog/coordinator/group"
)

// Helpers of the group and transaction handlers (08-16, 22-28, 42, 47).

// clientHost is the remote host of a connection, as DescribeGroups shows.
func clientHost(c *conn) string {
	addr := c.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return "/" + h
	}
	return addr
}

// waitFuture blocks in a reply's resolve until f resolves or the
// connection goes away (ok false: send nothing).
func waitFuture[T any](f *group.Future[T], done <-chan struct{}) (T, bool) {
	select {
	case <-f.Done():
		return f.Result(), true
	case <-done:
		var zero T
		return zero, false
	}
}
