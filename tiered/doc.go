// Package tiered is ringlog's remote tier (KIP-405-style tiered storage):
// sealed segments of topics with remote.storage.enable are uploaded by the
// partition leader to an S3-compatible object store, the uploaded ranges
// are recorded in remote-log metadata replicated by the controller, local
// retention then keeps only a hot window, and fetches below the local log
// start are served from the object store through an on-disk chunk cache.
//
// Subpackages:
//   - rlm: the remote-log metadata types (a leaf package: the controller's
//     metadata image imports it).
//   - objstore: the object-store interface, its S3 client, and a fault
//     wrapper for tests.
//   - s3test: an S3-compatible server on loopback that tests start and
//     stop.
//   - chunkcache: the bounded on-disk LRU cache of object chunks that
//     remote fetches are sent from with sendfile.
package tiered
