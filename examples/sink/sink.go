// Package sink is the consumer side of exactly-once effects: an
// idempotent-apply helper for code that reads a Kafka partition and changes
// a local database.
//
// # The contract
//
// A consumer processes a record, then commits the next offset. If it
// crashes in between, its group resumes at the old committed offset and
// the record is delivered again. Apply makes that replay harmless: in ONE
// bbolt transaction it checks a dedupe bucket for the event id, runs the
// caller's change, and records the id. Either all three are durable (the
// commit fsyncs) or none is, so a replayed event finds its id and is
// skipped, and a crashed one left no trace and is applied on replay.
//
// # Limits
//
//   - The change must be made through the *bolt.Tx Apply passes in. A
//     marker written in a separate transaction (or a side effect outside
//     the database: an e-mail, a payment API call) reopens the crash gap:
//     a crash between the effect and the marker repeats the effect. Such
//     destinations need their own idempotency key.
//   - Producer idempotence (and Kafka transactions) keep duplicates out of
//     the log; they do nothing for consumer side effects. Replays after a
//     consumer crash are normal operation, not a fault.
//   - The event id must be stable across redeliveries: a producer-assigned
//     id in the payload or a header, or the record's position
//     (EventID(topic, partition, offset)). A random id per delivery
//     deduplicates nothing.
//   - The dedupe set grows with every event. Prune it by age (PruneBefore)
//     once events that old can no longer be redelivered (older than the
//     topic's retention, or safely below the committed offset), or use the
//     offset scheme instead.
//
// # Two key schemes
//
// Apply keeps one key per event id: any id, any order, any number of
// writers, at the cost of growth until pruned. ApplyOffset keeps one
// high-water mark per (topic, partition): an event at or below the mark is
// skipped. It never grows, but it is only correct when each partition is
// applied by one writer strictly in offset order (the normal consumer
// loop); parallel or out-of-order processing within a partition would skip
// events that were never applied.
//
// # Why bbolt
//
// bbolt is pure Go, a single file, and gives serializable read-write
// transactions whose commit fsyncs, which is exactly the atomic "check,
// change, mark" unit required. It is already in ringlog's module graph
// through raft-boltdb, so it adds no dependency. SQLite would give the
// same guarantee with SQL on top: through mattn/go-sqlite3 it needs cgo,
// and the pure-Go modernc.org/sqlite (a C-to-Go translation of SQLite
// with its own libc) adds a large module tree for what here is a key set
// and a few counters; a consumer that already keeps its state in SQL can
// implement the same contract with one SQL transaction (see the limits). Callers get the *bolt.Tx
// to keep their own state in the same file. Its limits: one writer at a
// time (Apply calls serialize) and one process per file (an flock).
package sink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names. Callers must not use names with this prefix.
var (
	bucketDedupe = []byte("ringlog.sink.dedupe") // event id -> applied at (unix ns)
	bucketByTime = []byte("ringlog.sink.bytime") // applied at (8 bytes BE) + event id -> nil, for pruning
	bucketHWM    = []byte("ringlog.sink.hwm")    // topic 0x00 partition(4 BE) -> offset (8 BE)
)

// Config configures a Sink.
type Config struct {
	// Now stamps applied events for PruneBefore; tests inject a clock.
	Now func() time.Time
	// LockTimeout bounds the wait for another process's lock on the file;
	// 0 waits forever (bbolt's default).
	LockTimeout time.Duration
}

// DefaultConfig uses the wall clock and waits up to 5s for the file lock.
func DefaultConfig() Config {
	return Config{Now: time.Now, LockTimeout: 5 * time.Second}
}

// Validate checks the Config.
func (c Config) Validate() error {
	if c.Now == nil {
		return errors.New("sink: Config.Now is nil")
	}
	if c.LockTimeout < 0 {
		return fmt.Errorf("sink: LockTimeout %v must not be negative", c.LockTimeout)
	}
	return nil
}

// Sink is a bbolt database with a dedupe set. It is safe for concurrent
// use; write transactions run one at a time.
type Sink struct {
	db  *bolt.DB
	now func() time.Time
}

// Open opens (creating if needed) the database at path with DefaultConfig.
func Open(path string) (*Sink, error) { return OpenConfig(path, DefaultConfig()) }

// OpenConfig opens the database at path.
func OpenConfig(path string, cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: cfg.LockTimeout})
	if err != nil {
		return nil, fmt.Errorf("sink: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketDedupe, bucketByTime, bucketHWM} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sink: init %s: %w", path, err)
	}
	return &Sink{db: db, now: cfg.Now}, nil
}

// DB is the underlying database, for reads and for the caller's own buckets.
func (s *Sink) DB() *bolt.DB { return s.db }

// Close closes the database.
func (s *Sink) Close() error { return s.db.Close() }

// ErrEmptyEventID is returned for an empty event id, which would make every
// event a duplicate of the first.
var ErrEmptyEventID = errors.New("sink: empty event id")

// Apply runs change and records eventID in one transaction, unless eventID
// was already recorded: then it returns (false, nil) without running change.
// If change returns an error the transaction rolls back, nothing is
// recorded, and (false, err) is returned, so a later replay applies it.
func (s *Sink) Apply(eventID string, change func(tx *bolt.Tx) error) (applied bool, err error) {
	if eventID == "" {
		return false, ErrEmptyEventID
	}
	id := []byte(eventID)
	err = s.db.Update(func(tx *bolt.Tx) error {
		dd := tx.Bucket(bucketDedupe)
		if dd.Get(id) != nil {
			return nil
		}
		if err := change(tx); err != nil {
			return err
		}
		at := binary.BigEndian.AppendUint64(nil, uint64(s.now().UnixNano()))
		if err := dd.Put(id, at); err != nil {
			return err
		}
		if err := tx.Bucket(bucketByTime).Put(append(at, id...), nil); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}

// Seen reports whether eventID has been applied (and not pruned).
func (s *Sink) Seen(eventID string) (bool, error) {
	var seen bool
	err := s.db.View(func(tx *bolt.Tx) error {
		seen = tx.Bucket(bucketDedupe).Get([]byte(eventID)) != nil
		return nil
	})
	return seen, err
}

// PruneBefore forgets event ids applied before t and returns how many. Only
// prune ids that can no longer be redelivered: a pruned id that comes back
// is applied again.
func (s *Sink) PruneBefore(t time.Time) (int, error) {
	limit := binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		dd, bt := tx.Bucket(bucketDedupe), tx.Bucket(bucketByTime)
		// Collect first: deleting under a live cursor skips keys in bbolt.
		var old [][]byte
		c := bt.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) < 0; k, _ = c.Next() {
			old = append(old, append([]byte(nil), k...))
		}
		for _, k := range old {
			if err := dd.Delete(k[8:]); err != nil {
				return err
			}
			if err := bt.Delete(k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}

// EventID is the position-based id "topic/partition/offset": stable across
// redeliveries of the same record, and what ApplyOffset tracks as a mark.
func EventID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}

func hwmKey(topic string, partition int32) []byte {
	k := append([]byte(topic), 0)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

// ApplyOffset is the high-water-mark scheme: it runs change and raises the
// (topic, partition) mark to offset in one transaction, unless offset is at
// or below the mark, in which case it returns (false, nil). Correct only
// for one writer applying each partition in offset order (see the package
// doc); the state it keeps is one key per partition.
func (s *Sink) ApplyOffset(topic string, partition int32, offset int64, change func(tx *bolt.Tx) error) (applied bool, err error) {
	key := hwmKey(topic, partition)
	err = s.db.Update(func(tx *bolt.Tx) error {
		hw := tx.Bucket(bucketHWM)
		if v := hw.Get(key); v != nil && int64(binary.BigEndian.Uint64(v)) >= offset {
			return nil
		}
		if err := change(tx); err != nil {
			return err
		}
		if err := hw.Put(key, binary.BigEndian.AppendUint64(nil, uint64(offset))); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}

// HighWater returns the (topic, partition) mark: the last offset
// ApplyOffset applied, and false if none. A consumer may resume at mark+1
// instead of its committed offset.
func (s *Sink) HighWater(topic string, partition int32) (int64, bool, error) {
	var off int64
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketHWM).Get(hwmKey(topic, partition)); v != nil {
			off, ok = int64(binary.BigEndian.Uint64(v)), true
		}
		return nil
	})
	return off, ok, err
}
