// Package chunkcache is the bounded on-disk cache that fetches below the
// local log start are served from: objects of the remote tier are cut in
// fixed chunks, each chunk is fetched once from the object store into a
// file of the cache directory, and Get hands out a range of that file that
// the fetch path sends with sendfile exactly like a local segment.
//
// # Use
//
// The broker opens one Cache for all remote reads, with the object
// store's GetRange as the FetchFunc (Open(cfg, store.GetRange)), and
// closes it at shutdown after the fetch path. The remote reader serves a
// fetch below the local log start from the committed rlm.Segment holding
// the offset: it finds the batch positions with the segment's offset
// index and the batch headers (ReadAt through the cache, which crosses
// chunk boundaries), then asks Get for the bytes from the first batch on,
// or GetSpan when the batches it must return cross a chunk boundary (a
// fetch has to carry at least one whole batch), and puts the range in
// engine.ReadResult.Data; netpath releases it after sending. Remote
// retention and topic deletion call Drop for each object they delete.
// Stats feed the metrics.
//
// # Files
//
// All names live in names.go. The directory holds only:
//
//	<hash>-<off>-<len>-<crc>.chunk   a complete chunk
//	chunk-<random>.tmp               a chunk being written, or a GetSpan
//	                                 copy (unlinked as soon as it is open)
//
// hash is the first 16 bytes of SHA-256 of the object key (32 hex digits:
// keys contain slashes and are unbounded), off the chunk's byte offset in
// the object (16 hex digits), len its length (8 hex digits) and crc the
// CRC-32C of its bytes (8 hex digits). Naming chunks by offset rather than
// index keeps a file valid if ChunkBytes changes between runs; files whose
// offset or length does not fit the current ChunkBytes are deleted at Open.
// A chunk file is renamed into place only once it holds exactly the
// expected number of bytes, and is never written again.
//
// # Fault model and restart
//
// Chunk files are not fsynced: the cache can always fetch again. Open
// deletes leftover temp files and chunk files whose size does not match
// their name, and keeps the rest (counted against MaxBytes; in LRU order
// by modification time, the time the chunk was fetched). A kept chunk is not trusted
// until its CRC is checked: the first Get that needs it after Open reads
// it whole and compares the CRC with its name (a power loss can leave a
// renamed file of the right size with stale blocks on some file systems);
// a mismatch deletes the file, counts a corrupt chunk and fetches it
// again. Files not named *.chunk or chunk-*.tmp are never touched, so a
// misconfigured directory loses little. Two Caches must not share a
// directory.
//
// The cache assumes an object's bytes never change under its key: the
// remote tier names every upload attempt with a fresh segment id
// (rlm.ObjectKey). A Get whose objectSize disagrees with a cached chunk's
// length drops that chunk and fetches again; Drop removes a key's chunks
// when retention deletes the object.
//
// # Size bound
//
// CachedBytes (the chunk files in the directory) never exceeds MaxBytes.
// Admitting a fetched chunk evicts least recently used chunks that no
// range pins. When everything left is pinned, the new chunk is served
// without being cached: its file is unlinked at once and the open file
// descriptor kept until the last range of it is released, so after all
// releases the disk holds at most MaxBytes. On top of MaxBytes the disk
// holds at any moment the temp files of fetches in flight (at most
// ReadAheadConcurrency plus the callers' concurrent misses, ChunkBytes
// each) and pinned files that were unlinked: chunks dropped while pinned,
// chunks served without caching, GetSpan copies (Stats.PinnedUnlinked).
//
// # Concurrency
//
// A Cache is safe for concurrent use. One mutex guards the index, the LRU
// list and the counters; fetches, reads and verification run outside it.
// Concurrent Gets of one chunk share one fetch (single-flight). A fetch
// runs under the cache's context, not the caller's: a Get whose context
// ends returns at once and the fetch completes (and is cached) for the
// next reader; Close cancels every fetch in flight.
package chunkcache
