// Package brokertest starts the pieces of a one-node broker in process
// for the tests of netpath and broker: an engine on a temporary directory
// and a controller node on its own raft.
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
)

// Logger discards everything.
func Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Engine opens an engine (sync write path, no fsync) closed at cleanup.
func Engine(t testing.TB, log *slog.Logger) *engine.Engine {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.IOMode = "sync"
	cfg.Fsync = engine.FsyncNever
	cfg.Logger = log
	eng, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// Node starts node 1 of a one-node cluster registering endpoints, waits
// until it is ready (registered, caught up), and closes it at cleanup.
func Node(t testing.TB, endpoints []metadata.Endpoint, log *slog.Logger) *controller.Node {
	t.Helper()
	cfg := controller.DefaultConfig()
	cfg.NodeID = 1
	cfg.DataDir = t.TempDir()
	cfg.Endpoints = endpoints
	cfg.Logger = log
	node, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	if err := node.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return node
}
