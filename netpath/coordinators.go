package netpath

import (
	"time"

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

// waitFuture blocks in r's resolve until f resolves or the connection
// goes away (ok false: send nothing). The wait (a rebalance, a commit's
// append, the transaction coordinator) is r's parked time: the work is
// the coordinator's, not this request's (request_quota.go).
func waitFuture[T any](r *request, f *group.Future[T], done <-chan struct{}) (T, bool) {
	parkedAt := time.Now()
	select {
	case <-f.Done():
		r.park(parkedAt)
		return f.Result(), true
	case <-done:
		var zero T
		return zero, false
	}
}
