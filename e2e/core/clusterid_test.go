package core

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/vfs"
)

// readIdentity reads dir's meta.properties and checks that it is the data
// dir's only identity file and that no temporary file is left beside it.
func readIdentity(t *testing.T, dir string) layout.Meta {
	t.Helper()
	m, found, err := layout.ReadMeta(vfs.Default, dir)
	if err != nil || !found {
		t.Fatalf("meta.properties: found %v, %v", found, err)
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if n.Name() == layout.LegacyClusterIDFile || strings.HasSuffix(n.Name(), layout.TmpSuffix) {
			t.Fatalf("%s left in the data dir", n.Name())
		}
	}
	return m
}

// The cluster id a new broker draws must survive a kill -9 right after its
// first start, and a restart must come back with the same id. (A power cut,
// which also drops unsynced page cache, is simulated at unit level:
// internal/layout TestClusterIDSurvivesPowerCutAfterFirstStart.) A data
// dir of an older version, with the id in cluster.id, keeps its id.
func TestClusterIDSurvivesKill9AfterFirstStart(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9 and restart
	dir := t.TempDir()
	b := harness.StartBroker(t, dir)
	h, err := b.Health()
	if err != nil {
		t.Fatal(err)
	}
	cid, _ := h["cluster_id"].(string)
	nodeID, _ := h["node_id"].(float64)
	if cid == "" {
		t.Fatalf("no cluster id in /healthz: %v", h)
	}
	// Ready means registered, and the id is written before registering
	// completes: from here on it must be on disk.
	want := layout.Meta{NodeID: int32(nodeID), ClusterID: cid}
	if m := readIdentity(t, dir); m != want {
		t.Fatalf("meta.properties %+v once ready, want %+v", m, want)
	}
	b.Kill9()
	if m := readIdentity(t, dir); m != want {
		t.Fatalf("meta.properties %+v after kill -9, want %+v", m, want)
	}
	b.Restart()
	if h, err := b.Health(); err != nil || h["cluster_id"] != cid {
		t.Fatalf("after kill -9 and restart: cluster %v (%v), want %s", h["cluster_id"], err, cid)
	}
	b.Stop()
	if m := readIdentity(t, dir); m != want {
		t.Fatalf("meta.properties %+v after restart, want %+v", m, want)
	}

	// An older version's data dir: the id in cluster.id only.
	if err := layout.WriteMeta(vfs.Default, dir, layout.Meta{NodeID: want.NodeID}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, layout.LegacyClusterIDFile), []byte(cid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	if h, err := b.Health(); err != nil || h["cluster_id"] != cid {
		t.Fatalf("old data dir: cluster %v (%v), want %s", h["cluster_id"], err, cid)
	}
	if m := readIdentity(t, dir); m != want {
		t.Fatalf("meta.properties %+v after adopting cluster.id, want %+v", m, want)
	}
	if _, err := os.Stat(filepath.Join(dir, layout.LegacyClusterIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster.id kept: %v", err)
	}
}
