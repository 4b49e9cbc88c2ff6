package remote

import (
	"container/list"
	"sync"
)

// lru is a small cache of decoded objects (indexes, producer snapshots)
// bounded by the summed size its entries report. Objects never change
// under a key (every upload attempt has a fresh segment id), so entries
// need no invalidation; retention only makes them unreachable, and they
// age out.
type lru[V any] struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	ll       *list.List // front: most recent
	items    map[string]*list.Element
}

type lruEntry[V any] struct {
	key  string
	val  V
	size int64
}

func newLRU[V any](maxBytes int64) *lru[V] {
	return &lru[V]{maxBytes: maxBytes, ll: list.New(), items: make(map[string]*list.Element)}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

// put adds val; an entry larger than the whole bound is not kept.
func (c *lru[V]) put(key string, val V, size int64) {
	size = max(size, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.maxBytes {
		return
	}
	if e, ok := c.items[key]; ok {
		c.bytes -= e.Value.(*lruEntry[V]).size
		c.ll.Remove(e)
		delete(c.items, key)
	}
	for c.bytes+size > c.maxBytes {
		e := c.ll.Back()
		ent := e.Value.(*lruEntry[V])
		c.ll.Remove(e)
		delete(c.items, ent.key)
		c.bytes -= ent.size
	}
	c.items[key] = c.ll.PushFront(&lruEntry[V]{key: key, val: val, size: size})
	c.bytes += size
}
