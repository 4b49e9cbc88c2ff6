// Package controller runs ringlog's cluster metadata: a KRaft-style
// controller quorum on hashicorp/raft whose replicated state machine is
// package metadata (brokers, topics, partitions, producer-id blocks).
//
// # Roles
//
// Nodes named in Config.Voters are raft voters (controllers) and brokers
// ("combined mode"); every other node is a broker that follows the metadata
// log as a raft non-voter. The raft leader is the active controller. With no
// voters configured a node is a single-voter quorum of its own, on raft's
// in-memory transport (no port is opened), so single-node ringlog works
// unchanged apart from keeping metadata under DataDir/raft.
//
// # Bootstrap and cluster id
//
// On first start each voter bootstraps raft with the same static voter set.
// The first leader appends InitCluster with Config.ClusterID (or a new
// random id). Every broker registers through the controller with the cluster
// id it knows (Config.ClusterID, else DataDir/meta.properties, else none on
// its first start, when it adopts the cluster's and writes it there
// durably; an older data dir's cluster.id file is adopted and removed;
// Config.ClusterIDStore lets the caller do the writing); a different id is refused
// with metadata.ErrClusterIDMismatch before a non-voter is added to raft.
//
// # Transport: one port, two protocols
//
// The controller listener is shared by raft's NetworkTransport (through a
// custom raft.StreamLayer) and the controller RPC. A dialer's first byte
// selects the protocol: 'R' raft, 'C' controller RPC.
//
// The controller RPC is length-prefixed JSON (4-byte big-endian length, then
// a JSON object), one call at a time per connection: a request
// {Method, Body}, a response {Err, Msg, LeaderID, LeaderAddr, Index, Body}.
// We chose it over gRPC (a large dependency for eight small messages) and
// net/rpc (frozen, gob, and it forces exported message types into this
// package's API); the traffic is a heartbeat per broker per second plus rare
// admin calls. Neither of the two obvious Kafka-shaped options fits: the
// BrokerRegistration/BrokerHeartbeat/AlterPartition types of kmsg would
// bring the wire codec into controller (the project keeps kmsg inside
// netpath and clients), and hashicorp/raft has no RPC of its own to forward
// to the leader (its transport carries only raft's messages; Consul and
// Nomad add their own RPC layer for that, as this one does). The method
// names and fields mirror Kafka's messages so the mapping stays obvious. Errors travel as the text of a known sentinel error so
// errors.Is works on the caller's side. A non-controller answers
// ErrNotController with the leader's id and address when it knows them; the
// client follows that redirect, and otherwise tries the voters in turn until
// its context ends. In single-node mode and in tests the same RPC runs over
// net.Pipe.
//
// # Brokers, heartbeats and fencing
//
// A broker registers with a new incarnation id on every process start; the
// registration's raft index is its broker epoch. It starts fenced. It then
// heartbeats every HeartbeatInterval with the index it has applied; the
// controller unfences it once that index reaches the controller's commit
// index (as of the broker's first heartbeat while fenced). The active
// controller keeps heartbeat times in memory only and fences a broker that
// misses them for BrokerSessionTimeout: every partition it leads moves to
// the first in-sync unfenced replica (leader and partition epochs bumped;
// it leaves ISRs that keep another member), or goes offline (leader -1).
// A new controller gives every broker a full session before fencing.
// Nothing in that path moves leaderships back: every
// LeaderRebalanceInterval the active controller returns them to preferred
// replicas (Replicas[0]) that are unfenced and in the ISR, for brokers
// whose imbalance exceeds LeaderImbalancePercent (rebalance.go).
//
// # Staleness bound
//
// Readers use Node.MetadataImage, an immutable snapshot, and Node.Fresh
// before answering clients. Fresh fails when this broker is fenced or not
// registered, when the last heartbeat the controller acknowledged was sent
// more than BrokerSessionTimeout ago or was answered "fenced" (a lease: the
// controller's session clock starts when it receives the heartbeat, so the
// lease ends before the controller may fence this broker and move its
// leaderships), or when this node is not the raft leader and either
// raft.LastContact is older than MaxStaleness (default
// BrokerSessionTimeout, 9s) or its image is: every heartbeat answer
// carries the controller's commit index, and the image counts as fresh as
// of the latest heartbeat send time whose commit index this node has
// applied (applylag.go), so a broker in contact but applying slowly is
// caught too. Answers are therefore at most MaxStaleness behind the
// controller, and a broker cut off from the controller stops answering at
// about the time the controller fences it and moves its leaderships.
//
// # Change notifications
//
// Node.Changed returns a channel closed at the next applied entry; the
// broker re-reads MetadataImage and diffs it against what it acted on
// (create/delete local logs, become leader/follower).
package controller
