package broker

import (
	"fmt"
	"path/filepath"

	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/vfs"
)

// bindMeta ties cfg to its data dir's meta.properties (layout.OpenMeta
// creates it durably on first start): the node id must match, and the
// cluster id asked for (Controller.ClusterID, --cluster-id), if any, must
// be the one the data dir belongs to. meta.properties is the only place a
// data dir keeps its cluster id: the controller is handed it from here,
// insists on it when registering (a data dir of another cluster is
// refused), and stores a newly learned one back through ClusterIDStore.
func (c *Config) bindMeta() error {
	dataDir, nodeID := c.DataDir, c.NodeID
	meta, err := layout.OpenMeta(vfs.Default, dataDir, nodeID)
	if err != nil {
		return err
	}
	if id := c.Controller.ClusterID; id != "" {
		if meta.ClusterID != "" && meta.ClusterID != id {
			return fmt.Errorf("%s belongs to cluster %q, but --cluster-id is %q", filepath.Join(dataDir, layout.MetaFile), meta.ClusterID, id)
		}
		meta.ClusterID = id
	}
	c.Controller.ClusterID = meta.ClusterID
	c.Controller.ClusterIDStore = func(id string) error {
		return layout.WriteMeta(vfs.Default, dataDir, layout.Meta{NodeID: nodeID, ClusterID: id})
	}
	return nil
}
