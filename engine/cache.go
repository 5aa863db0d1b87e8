package engine

import (
	"container/list"
	"sync"
	"time"
)

// doneCache keeps the keys this execution environment saw done, newest
// first, up to its size: a duplicate of one is dropped without a read.
// Only a done marker is kept (a done key never runs again while its marker
// lives), and each entry leaves when that marker would expire.
type doneCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of Key, most recent at the front
	byKey map[Key]*list.Element
	info  map[Key]cached
}

type cached struct {
	fp      string
	expires time.Time
}

func newDoneCache(size int) *doneCache {
	return &doneCache{size: size, order: list.New(), byKey: map[Key]*list.Element{}, info: map[Key]cached{}}
}

// add keeps k as done, with its fingerprint, until expires.
func (c *doneCache) add(k Key, fp string, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
	} else {
		c.byKey[k] = c.order.PushFront(k)
	}
	c.info[k] = cached{fp: fp, expires: expires}
	for c.order.Len() > c.size {
		last := c.order.Back()
		old := last.Value.(Key)
		c.order.Remove(last)
		delete(c.byKey, old)
		delete(c.info, old)
	}
}

// remove drops k.
func (c *doneCache) remove(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.Remove(e)
		delete(c.byKey, k)
		delete(c.info, k)
	}
}

// get returns what the cache knows of k at now.
func (c *doneCache) get(k Key, now time.Time) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.info[k]
	if !ok {
		return cached{}, false
	}
	if !v.expires.IsZero() && !now.Before(v.expires) {
		c.order.Remove(c.byKey[k])
		delete(c.byKey, k)
		delete(c.info, k)
		return cached{}, false
	}
	return v, true
}

// remember keeps k as done, when the Mux has a cache.
func (m *runner) remember(k Key, fp string, expires time.Time) {
	if m.cache != nil {
		m.cache.add(k, fp, expires)
	}
}

// forget drops k from the cache (its marker is no longer done).
func (m *runner) forget(k Key) {
	if m.cache != nil {
		m.cache.remove(k)
	}
}

// fromCache decides a record whose key the cache holds as done: a
// duplicate, or a fingerprint mismatch. It reports whether it decided.
func (m *runner) fromCache(it *item) bool {
	if m.cache == nil {
		return false
	}
	c, ok := m.cache.get(it.key, m.o.Now())
	if !ok {
		return false
	}
	if it.fp != "" && c.fp != "" && c.fp != it.fp {
		return false // the peek and the dead letter say why
	}
	it.out = outcome{kind: kindDuplicate, reason: "already processed (this environment saw it done)"}
	return true
}
