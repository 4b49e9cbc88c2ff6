package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/replication"
)

// Config configures a Broker. DefaultConfig fills every field that has a
// default; `ringlog serve` takes its flags' defaults from it, so each
// default is written once, here or in a sub-config's DefaultConfig.
//
// Fields the broker derives are overwritten by New: the sub-configs'
// node id, data dir and logger come from NodeID, DataDir and Logger, and
// Controller.Endpoints from the bound listeners.
type Config struct {
	// WireConfig configures the Kafka server and the group and
	// transaction coordinators behind it.
	WireConfig

	// NodeID is this broker's id (1); it is also its controller node id.
	NodeID int32
	// DataDir holds the segments, checkpoints and the controller's raft
	// state (./data). It is created if missing.
	DataDir string
	// Listen is the plaintext Kafka listener's host:port (127.0.0.1:9092).
	Listen string
	// TLS is the optional TLS Kafka listener.
	TLS TLSConfig
	// AdminListen is the HTTP admin listener's host:port (/healthz,
	// /metrics; 127.0.0.1:9644); empty disables it.
	AdminListen string
	// AdminHandlers, when set, registers more endpoints (profiling,
	// fault injection) on the admin listener's mux. New calls it once the
	// admin listener is up, with the broker it is building: b.Engine()
	// and b.Stats() are usable, the broker is not started yet. Not called
	// without an admin listener.
	AdminHandlers func(mux *http.ServeMux, b *Broker)

	// Engine configures storage; Engine.FS may be a fault-injecting
	// vfs.ErrorFS (--fault-injection).
	Engine engine.Config
	// Controller configures the controller node: Voters,
	// ControllerListen (default: this node's address among Voters),
	// Rack, timeouts, and the data dir's ClusterID with its
	// ClusterIDStore.
	Controller controller.Config
	// Replication configures followers and the ISR.
	Replication replication.Config
	// BootstrapUsers are SCRAM users created at start when the cluster
	// has no credential of theirs (bootstrap_users.go).
	BootstrapUsers []BootstrapUser
	// Tiered is tiered storage (tiered.go): the object store, the chunk
	// cache of remote reads and the uploads. Off without an endpoint.
	Tiered TieredConfig

	// ControllerStartTimeout bounds opening the raft stores and the
	// controller listener (30s).
	ControllerStartTimeout time.Duration
	// ControlledShutdownTimeout is how long Drain waits for the
	// controller to move this broker's leaderships away (5s); 0 skips
	// it. Only a multi-voter cluster has anywhere to move them.
	ControlledShutdownTimeout time.Duration
	// DrainTimeout bounds the drain of the Kafka connections (1s); a
	// connection closes once it has had no new request for DrainQuiet
	// (100ms) and its requests are answered.
	DrainTimeout time.Duration
	DrainQuiet   time.Duration

	// Version is reported in /healthz ("dev"); Commit is the source
	// revision the binary was built from, so a load report can name the
	// exact broker it measured.
	Version string
	Commit  string
	// Logger receives every subsystem's logs; nil means slog.Default().
	Logger *slog.Logger
}

// TLSConfig is the TLS Kafka listener. Its advertised address is
// Wire.TLSAdvertisedAddr.
type TLSConfig struct {
	// Listen is the listener's host:port; empty disables it.
	Listen string
	// CertFile and KeyFile are the PEM server certificate (chain) and
	// its key.
	CertFile, KeyFile string
	// ClientCAFile, when set, is a PEM CA bundle: clients must then
	// present a certificate it signed (mutual TLS).
	ClientCAFile string
}

// DefaultConfig returns the broker's defaults.
func DefaultConfig() Config {
	return Config{
		WireConfig:  DefaultWireConfig(),
		NodeID:      1,
		DataDir:     "./data",
		Listen:      "127.0.0.1:9092",
		AdminListen: "127.0.0.1:9644",
		Engine:      engine.DefaultConfig(),
		Controller:  controller.DefaultConfig(),
		Replication: replication.DefaultConfig(),
		Tiered:      DefaultTieredConfig(),

		ControllerStartTimeout:    30 * time.Second,
		ControlledShutdownTimeout: 5 * time.Second,
		DrainTimeout:              time.Second,
		DrainQuiet:                100 * time.Millisecond,
		Version:                   "dev",
	}
}

// resolved returns c with the derived fields filled: the sub-configs'
// node id, data dir and logger, and the controller listen address.
func (c Config) resolved() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Engine.Dir = c.DataDir
	c.Engine.Logger = c.Logger
	c.Wire.NodeID = c.NodeID
	c.Wire.Logger = c.Logger
	c.Controller.NodeID = c.NodeID
	c.Controller.DataDir = c.DataDir
	c.Controller.Logger = c.Logger
	if c.Tiered.CacheDir == "" && c.DataDir != "" {
		c.Tiered.CacheDir = filepath.Join(c.DataDir, layout.RemoteCacheDir)
	}
	c.Wire.RemoteStorage = c.Tiered.Enabled()
	if c.Controller.ControllerListen == "" {
		for _, v := range c.Controller.Voters {
			if v.ID == c.NodeID {
				c.Controller.ControllerListen = v.Addr
			}
		}
	}
	return c
}

// Validate checks the fields alone and against each other, the
// sub-configs included. The settings the Kafka server alone uses beyond
// Wire (the internal topics' segment sizes) are checked when New builds it.
func (c Config) Validate() error {
	c = c.resolved()
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("broker: node id %d must be >= 0", c.NodeID)
	case c.DataDir == "":
		return errors.New("broker: data dir is empty")
	case c.TLS.Listen == "" && (c.TLS.CertFile != "" || c.TLS.ClientCAFile != ""):
		return errors.New("broker: TLS certificate or client CA given without a TLS listener")
	case c.TLS.Listen != "" && (c.TLS.CertFile == "" || c.TLS.KeyFile == ""):
		return fmt.Errorf("broker: TLS listener %s needs a certificate and its key", c.TLS.Listen)
	case c.ControllerStartTimeout <= 0:
		return fmt.Errorf("broker: controller start timeout %v must be positive", c.ControllerStartTimeout)
	case c.ControlledShutdownTimeout < 0 || c.DrainTimeout < 0 || c.DrainQuiet < 0:
		return fmt.Errorf("broker: controlled shutdown timeout %v, drain timeout %v and drain quiet %v must not be negative",
			c.ControlledShutdownTimeout, c.DrainTimeout, c.DrainQuiet)
	case len(c.Controller.Voters) > 0 && c.Controller.ControllerListen == "":
		return fmt.Errorf("broker: node %d is not among the controller voters: it needs a controller listen address", c.NodeID)
	case len(c.Controller.Voters) == 0 && c.Controller.ControllerListen != "":
		return fmt.Errorf("broker: controller listen address %s needs controller voters", c.Controller.ControllerListen)
	}
	for _, v := range []interface{ Validate() error }{c.Engine, c.Controller, c.Replication, c.Wire, c.Groups, c.Transactions, c.Tiered} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return nil
}
