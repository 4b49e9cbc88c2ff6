package main

import (
	"github.com/ringlog/ringlog/engine/vfs"
	"github.com/ringlog/ringlog/internal/layout"
)

// metaFile records identity that must never change for a data dir: the
// node id it belongs to and the cluster id (layout.Meta). It is the one
// place a data dir keeps its cluster id: the coordinator is handed the id
// from here (and insists on it when registering, so a data dir of another
// cluster is refused) and writes it here through Config.ClusterIDStore when
// a node learns it at its first registration. A node that has never joined
// a cluster has no cluster.id line yet.
const metaFile = layout.MetaFile

type brokerMeta struct {
	clusterID string
	nodeID    int32
}

// loadOrCreateMeta reads dir's identity, creating it for nodeID on first
// start (and adopting a cluster.id file of older versions).
func loadOrCreateMeta(dir string, nodeID int32) (brokerMeta, error) {
	m, err := layout.OpenMeta(vfs.Default, dir, nodeID)
	return brokerMeta{clusterID: m.ClusterID, nodeID: m.NodeID}, err
}

// writeMeta replaces meta.properties durably (vfs.WriteFileAtomic).
func writeMeta(dir string, m brokerMeta) error {
	return layout.WriteMeta(vfs.Default, dir, layout.Meta{NodeID: m.nodeID, ClusterID: m.clusterID})
}
