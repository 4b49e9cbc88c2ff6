package txn

import (
	"fmt"
	"time"
)

// Config holds the transaction coordinator's settings. Names in
// parentheses are the Kafka broker settings they mirror.
type Config struct {
	// TransactionLogPartitions is the partition count of
	// __transaction_state (transaction.state.log.num.partitions). It must
	// never change once transactions exist: PartitionFor would move them.
	TransactionLogPartitions int
	// OffsetsTopicPartitions is __consumer_offsets' partition count
	// (offsets.topic.num.partitions): AddOffsetsToTxn adds the group's
	// partition to the transaction.
	OffsetsTopicPartitions int
	// MaxTransactionTimeout bounds the timeout a producer may ask for
	// (transaction.max.timeout.ms).
	MaxTransactionTimeout time.Duration
	// TransactionalIDExpiration forgets a transactional id idle this long
	// outside a transaction (transactional.id.expiration.ms, 7 days).
	TransactionalIDExpiration time.Duration
	// RemoveExpiredInterval is how often Tick looks for expired ids
	// (transaction.remove.expired.transaction.cleanup.interval.ms).
	RemoveExpiredInterval time.Duration
	// EndTxnWait makes EndTxn answer once the markers are written and the
	// Complete record is durable, or after this long, whichever is first
	// (the outcome is decided either way: the Prepare record is durable).
	// A client's next transaction then starts without the
	// CONCURRENT_TRANSACTIONS back-off it would get while markers are in
	// flight. 0 answers as soon as the Prepare record is durable, as Kafka
	// does.
	EndTxnWait time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		TransactionLogPartitions:  50,
		OffsetsTopicPartitions:    50,
		MaxTransactionTimeout:     15 * time.Minute,
		TransactionalIDExpiration: 7 * 24 * time.Hour,
		RemoveExpiredInterval:     time.Hour,
		EndTxnWait:                2 * time.Second,
	}
}

// Validate checks every field and the fields against each other.
func (c Config) Validate() error {
	switch {
	case c.TransactionLogPartitions <= 0:
		return fmt.Errorf("txn: TransactionLogPartitions %d must be positive", c.TransactionLogPartitions)
	case c.OffsetsTopicPartitions <= 0:
		return fmt.Errorf("txn: OffsetsTopicPartitions %d must be positive", c.OffsetsTopicPartitions)
	case c.MaxTransactionTimeout <= 0:
		return fmt.Errorf("txn: MaxTransactionTimeout %v must be positive", c.MaxTransactionTimeout)
	case c.TransactionalIDExpiration <= 0:
		return fmt.Errorf("txn: TransactionalIDExpiration %v must be positive", c.TransactionalIDExpiration)
	case c.RemoveExpiredInterval <= 0:
		return fmt.Errorf("txn: RemoveExpiredInterval %v must be positive", c.RemoveExpiredInterval)
	case c.EndTxnWait < 0:
		return fmt.Errorf("txn: EndTxnWait %v must not be negative", c.EndTxnWait)
	case c.RemoveExpiredInterval > c.TransactionalIDExpiration:
		return fmt.Errorf("txn: RemoveExpiredInterval %v exceeds TransactionalIDExpiration %v", c.RemoveExpiredInterval, c.TransactionalIDExpiration)
	}
	return nil
}

// Clock tells the machine the time for requests. Deadlines fire only from
// Tick.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
