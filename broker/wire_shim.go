package broker

import "github.com/ringlog/ringlog/engine"

// WireServer and NewWireServer let cmd/ringlog build the wire server until
// the Broker type (broker.go) owns the lifecycle and calls newWireServer
// itself; then this file goes.
type WireServer = wireServer

// NewWireServer is newWireServer.
func NewWireServer(cfg WireConfig, eng *engine.Engine) (*WireServer, error) {
	return newWireServer(cfg, eng)
}
