package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// metaFile records identity that must never change for a data dir: the
// cluster id fixed at first start and the node id it belongs to.
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
	if m.clusterID == "" || m.nodeID < 0 {
		return m, fmt.Errorf("%s: missing cluster.id or node.id", path)
	}
	if m.nodeID != nodeID {
		return m, fmt.Errorf("%s belongs to node %d, but --node-id is %d", path, m.nodeID, nodeID)
	}
	return m, nil
}

func createMeta(dir string, nodeID int32) (brokerMeta, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return brokerMeta{}, err
	}
	m := brokerMeta{clusterID: base64.RawURLEncoding.EncodeToString(raw[:]), nodeID: nodeID}
	content := fmt.Sprintf("# written at first start; never edit\ncluster.id=%s\nnode.id=%d\n", m.clusterID, nodeID)
	tmp := filepath.Join(dir, metaFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return m, err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return m, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return m, err
	}
	if err := f.Close(); err != nil {
		return m, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, metaFile)); err != nil {
		return m, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return m, err
	}
	defer d.Close()
	return m, d.Sync()
}
