package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/vfs"
)

// A node without Config.ClusterIDStore keeps the cluster id in
// meta.properties (no cluster.id file), and a data dir of an older version,
// whose id is in cluster.id, keeps working: the id is adopted, moved into
// meta.properties and insisted on.
func TestClusterIDInMetaProperties(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.NodeID = 4
	cfg.DataDir = dir
	cfg.Logger = testLogger(t)
	cfg.HeartbeatInterval = 100 * time.Millisecond
	n := startNode(t, cfg)
	waitReady(t, n)
	cid := n.MetadataImage().ClusterID()
	n.Close()
	m, found, err := layout.ReadMeta(vfs.Default, dir)
	if err != nil || !found || m != (layout.Meta{NodeID: 4, ClusterID: cid}) || cid == "" {
		t.Fatalf("meta.properties %+v found %v err %v, cluster %q", m, found, err, cid)
	}
	if _, err := os.Stat(filepath.Join(dir, layout.LegacyClusterIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a second cluster id file: %v", err)
	}

	// Turn the dir into an old version's: the id only in cluster.id.
	if err := layout.WriteMeta(vfs.Default, dir, layout.Meta{NodeID: 4}); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(dir, layout.LegacyClusterIDFile)
	if err := os.WriteFile(legacy, []byte(cid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, cfg)
	waitReady(t, n2)
	if got := n2.MetadataImage().ClusterID(); got != cid {
		t.Fatalf("cluster %q after migration, want %q", got, cid)
	}
	n2.Close()
	if m, _, _ := layout.ReadMeta(vfs.Default, dir); m.ClusterID != cid {
		t.Fatalf("not adopted: %+v", m)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster.id kept after adoption: %v", err)
	}

	// The adopted id is insisted on: an old dir of another cluster is
	// refused, as with meta.properties.
	layout.WriteMeta(vfs.Default, dir, layout.Meta{NodeID: 4})
	os.WriteFile(legacy, []byte("another-cluster\n"), 0o644)
	n3, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n3.Close()
	err = n3.Start(context.Background())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = n3.WaitReady(ctx)
		cancel()
	}
	if !errors.Is(err, metadata.ErrClusterIDMismatch) {
		t.Fatalf("old dir of another cluster: %v", err)
	}
}
