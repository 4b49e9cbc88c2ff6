package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// metaFile records identity that must never change for a data dir: the
// node id it belongs to and the cluster id. It is the one place a data dir
// keeps its cluster id: the coordinator is handed the id from here (and
// insists on it when registering, so a data dir of another cluster is
// refused) and writes it here through Config.ClusterIDStore when a node
// learns it at its first registration. A node that has never joined a
// cluster has no cluster.id line yet.
const metaFile = "meta.properties"

type brokerMeta struct {
	clusterID string
	nodeID    int32
}

func loadOrCreateMeta(dir string, nodeID int32) (brokerMeta, error) {
	path := filepath.Join(dir, metaFile)
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return createMeta(dir, nodeID)
	}
	if err != nil {
		return brokerMeta{}, err
	}
	defer f.Close()
	m := brokerMeta{nodeID: -1}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "cluster.id":
			m.clusterID = v
		case "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return m, fmt.Errorf("%s: bad node.id %q", path, v)
			}
			m.nodeID = int32(n)
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	if m.nodeID < 0 {
		return m, fmt.Errorf("%s: missing node.id", path)
	}
	if m.nodeID != nodeID {
		return m, fmt.Errorf("%s belongs to node %d, but --node-id is %d", path, m.nodeID, nodeID)
	}
	return m, nil
}

func createMeta(dir string, nodeID int32) (brokerMeta, error) {
	m := brokerMeta{nodeID: nodeID}
	return m, writeMeta(dir, m)
}

// writeMeta replaces meta.properties atomically (temp file, fsync, rename,
// directory fsync).
func writeMeta(dir string, m brokerMeta) error {
	content := fmt.Sprintf("# written by ringlog; never edit\nnode.id=%d\n", m.nodeID)
	if m.clusterID != "" {
		content += fmt.Sprintf("cluster.id=%s\n", m.clusterID)
	}
	tmp := filepath.Join(dir, metaFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, metaFile)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
