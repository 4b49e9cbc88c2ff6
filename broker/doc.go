// Package broker is ringlog's composition root: the one place that wires
// the subsystems of a broker together, from one Config, and owns their
// lifecycle (broker.go).
//
// New opens the storage engine, builds the Kafka server, binds its
// listeners, builds and starts the controller node and starts the HTTP
// admin listener; Start joins the cluster and starts serving; Drain moves
// leaderships away and answers what the connections have in flight; Close
// tears down everything New opened, once, in one place. A failing New
// closes what it had opened before returning.
//
// It builds what runs behind the
// Kafka wire server and hands it to netpath through netpath's narrow
// interfaces (netpath.Deps, netpath.Metadata, netpath.Replicas):
//
//   - wire.go: WireConfig and wireServer, the netpath server plus its
//     collaborators, started with the controller node;
//   - reconcile.go: the engine kept in line with the metadata image;
//   - replicas.go: partition replication (replication's state machines
//     driven per led or followed partition; follower fetches over
//     netpath/peer, the one inter-broker client);
//   - coordlog.go, groups.go, txn.go, txn_markers.go, producer_ids.go:
//     the group and transaction coordinators on their internal topics,
//     the marker writer and producer-id blocks;
//   - offline.go, diskspace.go: disk errors and full disks;
//   - admin.go, storage_metrics.go, replication_metrics.go: /healthz and
//     the storage and replication series of /metrics;
//     process_metrics.go: the process's context switches (/metrics) and
//     its counters for load reports (/v1/process/counters).
//
// Broker code speaks offsets, epochs, raw batch bytes and Go errors, never
// Kafka protocol types: netpath maps its errors to Kafka codes.
package broker
