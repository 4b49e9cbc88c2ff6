package layout

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/internal/vfs"
)

// dataDir returns a MemFS whose /data exists durably (created by the
// operator or an earlier boot, not by the first start under test).
func dataDir(t *testing.T) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	fs.SyncDir("/")
	return fs
}

func writeRaw(t *testing.T, fs vfs.FS, name, data string) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(data), 0)
	f.Sync()
	f.Close()
	fs.SyncDir("/data")
}

// The first start of a node creates its data dir and meta.properties and,
// once it learns the cluster id, writes it there; a power cut right after
// must find both. (The coordinator's old cluster.id writer, WriteFile and
// Rename without any fsync, loses the file here.)
func TestClusterIDSurvivesPowerCutAfterFirstStart(t *testing.T) {
	for _, torn := range []bool{false, true} {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/srv/data", 0o755); err != nil { // as serve does: no sync
			t.Fatal(err)
		}
		fs.SyncDir("/")
		m, err := OpenMeta(fs, "/srv/data", 3)
		if err != nil || m != (Meta{NodeID: 3}) {
			t.Fatalf("first start: %+v %v", m, err)
		}
		if err := WriteMeta(fs, "/srv/data", Meta{NodeID: 3, ClusterID: "Zm9vYmFyYmF6cXV4"}); err != nil {
			t.Fatal(err)
		}
		after := fs.Crash(vfs.CrashOptions{TornTail: torn, Seed: 7})
		m, found, err := ReadMeta(after, "/srv/data")
		if err != nil || !found || m != (Meta{NodeID: 3, ClusterID: "Zm9vYmFyYmF6cXV4"}) {
			t.Fatalf("after power cut (torn %v): %+v found %v err %v", torn, m, found, err)
		}
	}
}

// A failure at any step of recording the cluster id, then a power cut,
// leaves meta.properties readable and for the right node, with the id or
// (only if the write failed) without it.
func TestWriteMetaFaultThenPowerCut(t *testing.T) {
	cases := 0
	for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpWrite, vfs.OpSync, vfs.OpClose, vfs.OpRename, vfs.OpSyncDir} {
		for skip := 0; ; skip++ {
			mem := dataDir(t)
			if _, err := OpenMeta(mem, "/data", 1); err != nil {
				t.Fatal(err)
			}
			efs := vfs.Wrap(mem)
			efs.Inject(vfs.Fault{Op: op, Skip: skip, Count: 1})
			err := WriteMeta(efs, "/data", Meta{NodeID: 1, ClusterID: "c1"})
			if efs.Fired() == 0 {
				break
			}
			cases++
			m, err2 := OpenMeta(mem.Crash(vfs.CrashOptions{TornTail: true, Seed: int64(skip)}), "/data", 1)
			if err2 != nil || m.NodeID != 1 || (err == nil || m.ClusterID != "") && m.ClusterID != "c1" {
				t.Fatalf("op %d skip %d (write err %v): after crash %+v %v", op, skip, err, m, err2)
			}
		}
	}
	if cases < 6 {
		t.Fatalf("only %d failure points", cases)
	}
}

func TestOpenMetaAdoptsLegacyClusterID(t *testing.T) {
	for _, withMeta := range []bool{true, false} {
		t.Run(fmt.Sprintf("meta.properties=%v", withMeta), func(t *testing.T) {
			fs := dataDir(t)
			if withMeta {
				writeRaw(t, fs, "/data/"+MetaFile, "node.id=2\n")
			}
			writeRaw(t, fs, "/data/"+LegacyClusterIDFile, "old-cluster\n")
			m, err := OpenMeta(fs, "/data", 2)
			if err != nil || m != (Meta{NodeID: 2, ClusterID: "old-cluster"}) {
				t.Fatalf("%+v %v", m, err)
			}
			// Durably moved: meta.properties has it, cluster.id is gone.
			after := fs.Crash(vfs.CrashOptions{})
			names, _ := after.ReadDir("/data")
			if len(names) != 1 || names[0] != MetaFile {
				t.Fatalf("files after adoption and crash: %v", names)
			}
			if m, _, _ := ReadMeta(after, "/data"); m.ClusterID != "old-cluster" {
				t.Fatalf("after crash %+v", m)
			}
		})
	}
	// Two different ids: refuse rather than guess.
	fs := dataDir(t)
	writeRaw(t, fs, "/data/"+MetaFile, "node.id=2\ncluster.id=a\n")
	writeRaw(t, fs, "/data/"+LegacyClusterIDFile, "b\n")
	if _, err := OpenMeta(fs, "/data", 2); err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("conflicting ids: %v", err)
	}
	// The same id twice: the old file just goes.
	writeRaw(t, fs, "/data/"+LegacyClusterIDFile, "a\n")
	if m, err := OpenMeta(fs, "/data", 2); err != nil || m.ClusterID != "a" {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := fs.Stat("/data/" + LegacyClusterIDFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("legacy file kept: %v", err)
	}
}

func TestOpenMetaRefusesBadFiles(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{"node.id=4\n", "belongs to node 4"},
		{"# no id\ncluster.id=x\n", "missing node.id"},
		{"node.id=one\n", "bad node.id"},
		{strings.Repeat("#", maxMetaSize+1), "more than"},
	} {
		fs := dataDir(t)
		writeRaw(t, fs, "/data/"+MetaFile, c.content)
		if _, err := OpenMeta(fs, "/data", 5); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.20q: %v, want %q", c.content, err, c.want)
		}
	}
}

func TestNames(t *testing.T) {
	if got := OffsetFileName(42, SnapshotSuffix); got != "00000000000000000042.snapshot" || len(got) != OffsetNameDigits+len(SnapshotSuffix) {
		t.Fatal(got)
	}
	if got := PartitionDir("t", 12); got != "t-12" {
		t.Fatal(got)
	}
	if !strings.HasSuffix(CleanedSuffix, TmpSuffix) {
		t.Fatal(CleanedSuffix)
	}
}
