package marker

import (
	"context"
	"sync"
	"time"
)

// Memory is an in-memory marker store with the same rules as Dynamo, for unit
// tests and benchmarks of the code that uses markers. The conformance suite in
// markertest runs against both.
type Memory struct {
	mu    sync.Mutex
	items map[Key]Record
	// Retention is how long a claimed marker lives (DefaultRetention if 0).
	Retention time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Err, when set, is returned by every call instead of doing it.
	Err error
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{items: map[Key]Record{}} }

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Memory) retention() time.Duration {
	if m.Retention > 0 {
		return m.Retention
	}
	return DefaultRetention
}

// live returns the record under k unless it is absent or expired. Callers hold
// mu.
func (m *Memory) live(k Key, now time.Time) (Record, bool) {
	r, ok := m.items[k]
	if !ok || (!r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)) {
		return Record{}, false
	}
	return r, true
}

// Peek reads one marker.
func (m *Memory) Peek(_ context.Context, k Key) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return Record{}, false, m.Err
	}
	r, ok := m.live(k, m.now())
	return r, ok, nil
}

// PeekBatch reads many markers.
func (m *Memory) PeekBatch(_ context.Context, keys []Key) (map[Key]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return nil, m.Err
	}
	now := m.now()
	out := make(map[Key]Record, len(keys))
	for _, k := range keys {
		if r, ok := m.live(k, now); ok {
			out[k] = r
		}
	}
	return out, nil
}

// Lease takes the lease on k for owner until the given time.
func (m *Memory) Lease(_ context.Context, k Key, owner string, until time.Time) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return Record{}, m.Err
	}
	now := m.now()
	if old, ok := m.live(k, now); ok {
		switch {
		case old.Processed():
			return old, ErrProcessed
		case old.State == StateLeased && old.Owner != owner && old.LeaseActive(now):
			return old, ErrLeaseHeld
		}
	}
	rec := Record{Key: k, State: StateLeased, Owner: owner, LeaseUntil: until, ExpiresAt: until.Add(m.retention())}
	m.items[k] = rec
	return rec, nil
}

// Claim records k as processed; see Dynamo.Claim for the rules.
func (m *Memory) Claim(_ context.Context, k Key, owner string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return false, m.Err
	}
	now := m.now()
	if old, ok := m.live(k, now); ok {
		switch {
		case owner == "" || old.Processed():
			return false, nil
		case old.Owner != owner:
			return false, ErrLeaseLost
		}
	}
	m.items[k] = Record{Key: k, State: StateDone, ProcessedAt: now, ExpiresAt: now.Add(m.retention())}
	return true, nil
}

// Release gives up owner's lease on k.
func (m *Memory) Release(_ context.Context, k Key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	if old, ok := m.items[k]; ok && old.State == StateLeased && old.Owner == owner {
		delete(m.items, k)
	}
	return nil
}
