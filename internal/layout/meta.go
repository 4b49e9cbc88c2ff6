package layout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ringlog/ringlog/internal/vfs"
)

// Meta is the identity of a data dir, kept in MetaFile: the node it belongs
// to and the cluster it joined. It is the one place a data dir keeps its
// cluster id. ClusterID is empty until the node learns it (configured, or
// adopted at its first registration).
type Meta struct {
	NodeID    int32
	ClusterID string
}

// ReadMeta reads dir/meta.properties; found is false when there is none.
func ReadMeta(fs vfs.FS, dir string) (m Meta, found bool, err error) {
	path := filepath.Join(dir, MetaFile)
	b, err := vfs.ReadFile(fs, path, maxMetaSize)
	if errors.Is(err, os.ErrNotExist) {
		return Meta{}, false, nil
	}
	if err != nil {
		return Meta{}, false, err
	}
	m = Meta{NodeID: -1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "cluster.id":
			m.ClusterID = v
		case "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return m, true, fmt.Errorf("%s: bad node.id %q", path, v)
			}
			m.NodeID = int32(n)
		}
	}
	if err := sc.Err(); err != nil {
		return m, true, fmt.Errorf("%s: %w", path, err)
	}
	if m.NodeID < 0 {
		return m, true, fmt.Errorf("%s: missing node.id", path)
	}
	return m, true, nil
}

// WriteMeta replaces dir/meta.properties durably (vfs.WriteFileAtomic).
func WriteMeta(fs vfs.FS, dir string, m Meta) error {
	content := fmt.Sprintf("# written by ringlog; never edit\nnode.id=%d\n", m.NodeID)
	if m.ClusterID != "" {
		content += fmt.Sprintf("cluster.id=%s\n", m.ClusterID)
	}
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, MetaFile), []byte(content), 0o644)
}

// OpenMeta returns the identity of data dir dir for node nodeID, creating
// meta.properties on first start (durably, with dir's entry in its parent)
// and refusing a dir of another node. A dir
// written before meta.properties held the cluster id may have it in
// LegacyClusterIDFile: OpenMeta moves it into meta.properties and removes
// the old file, so from then on there is one.
func OpenMeta(fs vfs.FS, dir string, nodeID int32) (Meta, error) {
	m, found, err := ReadMeta(fs, dir)
	if err != nil {
		return m, err
	}
	if !found {
		m = Meta{NodeID: nodeID}
		if err := WriteMeta(fs, dir, m); err != nil {
			return m, err
		}
		// A first start usually made dir just before (MkdirAll): make its
		// own entry durable too, or a power cut could take the whole dir.
		if err := fs.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return m, err
		}
	}
	if m.NodeID != nodeID {
		return m, fmt.Errorf("%s belongs to node %d, but the node id is %d", filepath.Join(dir, MetaFile), m.NodeID, nodeID)
	}
	return m, adoptLegacyClusterID(fs, dir, &m)
}

func adoptLegacyClusterID(fs vfs.FS, dir string, m *Meta) error {
	legacy := filepath.Join(dir, LegacyClusterIDFile)
	b, err := vfs.ReadFile(fs, legacy, maxMetaSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	id := strings.TrimSpace(string(b))
	switch {
	case id == "":
		// An unsynced write of the old code, cut by a crash: nothing to adopt.
	case m.ClusterID == "":
		m.ClusterID = id
		if err := WriteMeta(fs, dir, *m); err != nil {
			return err
		}
	case m.ClusterID != id:
		return fmt.Errorf("%s says cluster %q but %s says %q: remove the wrong one", filepath.Join(dir, MetaFile), m.ClusterID, legacy, id)
	}
	if err := fs.Remove(legacy); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// maxMetaSize bounds what ReadMeta reads: the real files are tens of bytes.
const maxMetaSize = 64 << 10
