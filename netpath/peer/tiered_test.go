package peer

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
)

// OFFSET_MOVED_TO_TIERED_STORAGE (109) reaches the follower as the error
// it restarts from the remote tier on, not as an unknown error it only
// backs off from.
func TestFetchDecodesOffsetMovedToTieredStorage(t *testing.T) {
	fb := startFakeBroker(t, func(c net.Conn, corr int32) bool {
		c.Write(fetchResponse(corr, kerr.OffsetMovedToTieredStorage.Code, 42))
		return true
	})
	resp, err := fb.client(t).Fetch(context.Background(), 1, fetchReq())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Partitions) != 1 || !errors.Is(resp.Partitions[0].Err, replication.ErrOffsetMovedToTieredStorage) {
		t.Fatalf("partitions %+v, want ErrOffsetMovedToTieredStorage", resp.Partitions)
	}
}
