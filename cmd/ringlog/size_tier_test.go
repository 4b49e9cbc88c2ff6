package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestSizeTierFlags: the remote-tier flags reach the sizing (text and
// JSON), and misuse exits 2 before any arithmetic.
func TestSizeTierFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--local-retention", "6h"},
		{"--local-retention", "0s"},
		{"--object-store-copies", "2"},
		{"--object-store", "--local-retention", "169h"},
		{"--object-store", "--object-store-copies", "0"},
	} {
		if out, err := runApp(t, sizeCommand(), args...); exitStatus(err) != 2 {
			t.Errorf("size %v: exit %d (%v), want 2:\n%s", args, exitStatus(err), err, out)
		}
	}

	out, err := runApp(t, sizeCommand(), "--object-store", "--local-retention", "6h", "--disk-per-broker", "20", "--json")
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var got struct {
		Workload struct {
			ObjectStore         bool    `json:"object_store"`
			LocalRetentionHours float64 `json:"local_retention_hours"`
			ObjectStoreCopies   float64 `json:"object_store_copies"`
		} `json:"workload"`
		Capacity struct {
			Bounds []struct {
				Resource string `json:"resource"`
				Brokers  int    `json:"brokers"`
			} `json:"bounds"`
			Tiered struct {
				BrokerDiskBytes  float64 `json:"broker_disk_bytes"`
				ObjectStoreBytes float64 `json:"object_store_bytes"`
			} `json:"tiered"`
		} `json:"capacity"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	w, c := got.Workload, got.Capacity
	if !w.ObjectStore || w.LocalRetentionHours != 6 || w.ObjectStoreCopies != 1 ||
		math.Abs(c.Tiered.BrokerDiskBytes-32.4e12) > 1 || math.Abs(c.Tiered.ObjectStoreBytes-302.4e12) > 1 ||
		len(c.Bounds) != 2 || c.Bounds[0].Resource != "replication factor" || c.Bounds[0].Brokers != 3 ||
		c.Bounds[1].Resource != "disk" || c.Bounds[1].Brokers != 2 {
		t.Fatalf("size --object-store --local-retention 6h --json:\n%s", out)
	}

	// No --local-retention: the whole retention stays local, the store
	// adds one copy; a Go duration below an hour works too.
	if out, err = runApp(t, sizeCommand(), "--object-store"); err != nil || !strings.Contains(out, "the hot window is the whole retention") {
		t.Fatalf("size --object-store: %v\n%s", err, out)
	}
	if out, err = runApp(t, sizeCommand(), "--object-store", "--local-retention", "90m"); err != nil || !strings.Contains(out, "hot window 1.5 h") {
		t.Fatalf("size --object-store --local-retention 90m: %v\n%s", err, out)
	}
}
