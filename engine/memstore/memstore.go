// Package memstore is an in-memory engine.Store with the same rules as the
// DynamoDB store (package dynamostore): for tests, benchmarks and a function
// that runs on one node. The conformance suite of package enginetest runs on
// both.
package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// Store is an in-memory marker store. It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	items map[engine.Key]engine.Record
	// Retention is how long a settled marker lives (engine.DefaultRetention if 0).
	Retention time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Err, when set, is returned by every call instead of doing it.
	Err error
}

// New returns an empty store.
func New() *Store { return &Store{items: map[engine.Key]engine.Record{}} }

func (m *Store) retention() time.Duration {
	if m.Retention > 0 {
		return m.Retention
	}
	return engine.DefaultRetention
}

// live returns the record under k unless it is absent or expired. Callers hold
// mu.
func (m *Store) live(k engine.Key, now time.Time) (engine.Record, bool) {
	r, ok := m.items[k]
	if !ok || (!r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)) {
		return engine.Record{}, false
	}
	return r, true
}

// do runs f under the lock with the current time, unless Err is set.
func (m *Store) do(f func(now time.Time) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	return f(now())
}

// Peek reads one marker.
func (m *Store) Peek(_ context.Context, k engine.Key) (r engine.Record, ok bool, err error) {
	err = m.do(func(now time.Time) error { r, ok = m.live(k, now); return nil })
	return r, ok, err
}

// PeekBatch reads many markers.
func (m *Store) PeekBatch(_ context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	out := make(map[engine.Key]engine.Record, len(keys))
	err := m.do(func(now time.Time) error {
		for _, k := range keys {
			if r, ok := m.live(k, now); ok {
				out[k] = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Lease takes the lease on k for owner until the given time; see
// dynamostore.Store.Lease.
func (m *Store) Lease(_ context.Context, k engine.Key, owner string, until time.Time) (rec engine.Record, err error) {
	err = m.do(func(now time.Time) error {
		if old, ok := m.live(k, now); ok && (old.State != engine.StateLeased || (old.Owner != owner && old.LeaseActive(now))) {
			rec = old
			return old.Conflict()
		}
		rec = engine.Record{Key: k, State: engine.StateLeased, Owner: owner, LeaseUntil: until, LeasedAt: now.Truncate(time.Millisecond), ExpiresAt: until.Add(m.retention())}
		m.items[k] = rec
		return nil
	})
	return rec, err
}

// Claim records k as processed; see dynamostore.Store.Claim.
func (m *Store) Claim(_ context.Context, k engine.Key, owner string, due time.Time) (won bool, err error) {
	err = m.do(func(now time.Time) error {
		if old, ok := m.live(k, now); ok && !(owner != "" && old.Owner == owner && (old.State == engine.StateLeased || old.State == engine.StateDone)) {
			if old.Settled() {
				return nil
			}
			return engine.ErrLeaseLost
		}
		m.items[k] = engine.Record{Key: k, State: engine.StateDone, Owner: owner, ProcessedAt: now, ExpiresAt: engine.SettledUntil(now, due, m.retention())}
		won = true
		return nil
	})
	return won, err
}

// Fail records that k's job failed; see dynamostore.Store.Fail.
func (m *Store) Fail(_ context.Context, k engine.Key, owner string, due time.Time) error {
	return m.do(func(now time.Time) error {
		old, ok := m.live(k, now)
		var may bool
		switch {
		case ok && old.State == engine.StateFailed:
			return nil
		case owner != "":
			may = ok && old.Owner == owner && (old.State == engine.StateDone || old.State == engine.StateLeased)
		default:
			may = !ok || (old.State == engine.StateLeased && !old.LeaseActive(now))
		}
		if !may {
			return engine.ErrLeaseLost
		}
		m.items[k] = engine.Record{Key: k, State: engine.StateFailed, Owner: owner, ProcessedAt: now, ExpiresAt: engine.SettledUntil(now, due, m.retention())}
		return nil
	})
}

// Tombstone marks k cancelled, its job due at due; see dynamostore.Store.Tombstone.
func (m *Store) Tombstone(_ context.Context, k engine.Key, due time.Time) (rec engine.Record, err error) {
	err = m.do(func(now time.Time) error {
		if old, ok := m.live(k, now); ok && old.State != engine.StateCancelled && (old.State != engine.StateLeased || old.LeaseActive(now)) {
			rec = old
			return old.Conflict()
		}
		rec = engine.Record{Key: k, State: engine.StateCancelled, ProcessedAt: now, ExpiresAt: engine.SettledUntil(now, due, m.retention())}
		m.items[k] = rec
		return nil
	})
	return rec, err
}

// Release gives up owner's lease on k.
func (m *Store) Release(_ context.Context, k engine.Key, owner string) error {
	return m.do(func(time.Time) error {
		if old, ok := m.items[k]; ok && old.State == engine.StateLeased && old.Owner == owner {
			delete(m.items, k)
		}
		return nil
	})
}

// ResetFailed deletes k when it is in engine.StateFailed (a redrive runs the effect
// again); see marker.Resetter in the bundle.
func (m *Store) ResetFailed(_ context.Context, k engine.Key) error {
	return m.do(func(time.Time) error {
		if old, ok := m.items[k]; ok && old.State == engine.StateFailed {
			delete(m.items, k)
		}
		return nil
	})
}
