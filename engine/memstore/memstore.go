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

func (s *Store) retention() time.Duration {
	if s.Retention > 0 {
		return s.Retention
	}
	return engine.DefaultRetention
}

// live returns the record under k unless it is absent or expired. Callers hold
// mu.
func (s *Store) live(k engine.Key, now time.Time) (engine.Record, bool) {
	r, ok := s.items[k]
	if !ok || (!r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)) {
		return engine.Record{}, false
	}
	return r, true
}

// do runs f under the lock with the current time, unless Err is set.
func (s *Store) do(f func(now time.Time) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Err != nil {
		return s.Err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return f(now())
}

// Peek reads one marker.
func (s *Store) Peek(_ context.Context, k engine.Key) (r engine.Record, ok bool, err error) {
	err = s.do(func(now time.Time) error { r, ok = s.live(k, now); return nil })
	return r, ok, err
}

// PeekBatch reads many markers.
func (s *Store) PeekBatch(_ context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	out := make(map[engine.Key]engine.Record, len(keys))
	err := s.do(func(now time.Time) error {
		for _, k := range keys {
			if r, ok := s.live(k, now); ok {
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

// Lease takes the lease on k for m.Owner until m.Until; see
// dynamostore.Store.Lease.
func (s *Store) Lease(_ context.Context, k engine.Key, m engine.Mark) (rec engine.Record, err error) {
	err = s.do(func(now time.Time) error {
		if old, ok := s.live(k, now); ok && (old.State != engine.StateLeased || (old.Owner != m.Owner && old.LeaseActive(now))) {
			rec = old
			return old.Conflict()
		}
		rec = engine.Record{Key: k, State: engine.StateLeased, Owner: m.Owner, LeaseUntil: m.Until, LeasedAt: now.Truncate(time.Millisecond),
			ExpiresAt: s.expiry(m.Expires, m.Until.Add(s.retention())), Fingerprint: m.Fingerprint}
		s.items[k] = rec
		return nil
	})
	return rec, err
}

// expiry is the expiry a write asked for, or def when it asked for none.
func (s *Store) expiry(asked, def time.Time) time.Time {
	if asked.IsZero() {
		return def
	}
	return asked
}

// Claim records k as processed; see dynamostore.Store.Claim.
func (s *Store) Claim(_ context.Context, k engine.Key, m engine.Mark) (won bool, err error) {
	err = s.do(func(now time.Time) error {
		if old, ok := s.live(k, now); ok && !(m.Owner != "" && old.Owner == m.Owner && (old.State == engine.StateLeased || old.State == engine.StateDone)) {
			if old.Settled() {
				return nil
			}
			return engine.ErrLeaseLost
		}
		s.items[k] = engine.Record{Key: k, State: engine.StateDone, Owner: m.Owner, ProcessedAt: now,
			ExpiresAt: s.expiry(m.Expires, now.Add(s.retention())), Fingerprint: m.Fingerprint, Result: m.Result}
		won = true
		return nil
	})
	return won, err
}

// Fail records that k's job failed; see dynamostore.Store.Fail.
func (s *Store) Fail(_ context.Context, k engine.Key, m engine.Mark) error {
	return s.do(func(now time.Time) error {
		old, ok := s.live(k, now)
		var may bool
		switch {
		case ok && old.State == engine.StateFailed:
			return nil
		case m.Owner != "":
			may = ok && old.Owner == m.Owner && (old.State == engine.StateDone || old.State == engine.StateLeased)
		default:
			may = !ok || (old.State == engine.StateLeased && !old.LeaseActive(now))
		}
		if !may {
			return engine.ErrLeaseLost
		}
		s.items[k] = engine.Record{Key: k, State: engine.StateFailed, Owner: m.Owner, ProcessedAt: now,
			ExpiresAt: s.expiry(m.Expires, now.Add(s.retention())), Fingerprint: m.Fingerprint}
		return nil
	})
}

// Tombstone marks k cancelled, its job due at due; see dynamostore.Store.Tombstone.
func (s *Store) Tombstone(_ context.Context, k engine.Key, due time.Time) (rec engine.Record, err error) {
	err = s.do(func(now time.Time) error {
		if old, ok := s.live(k, now); ok && old.State != engine.StateCancelled && (old.State != engine.StateLeased || old.LeaseActive(now)) {
			rec = old
			return old.Conflict()
		}
		rec = engine.Record{Key: k, State: engine.StateCancelled, ProcessedAt: now, ExpiresAt: engine.SettledUntil(now, due, s.retention())}
		s.items[k] = rec
		return nil
	})
	return rec, err
}

// Release gives up owner's lease on k.
func (s *Store) Release(_ context.Context, k engine.Key, owner string) error {
	return s.do(func(time.Time) error {
		if old, ok := s.items[k]; ok && old.State == engine.StateLeased && old.Owner == owner {
			delete(s.items, k)
		}
		return nil
	})
}

// ResetFailed deletes k when it is in engine.StateFailed (a redrive runs the effect
// again); see marker.Resetter in the bundle.
func (s *Store) ResetFailed(_ context.Context, k engine.Key) error {
	return s.do(func(time.Time) error {
		if old, ok := s.items[k]; ok && old.State == engine.StateFailed {
			delete(s.items, k)
		}
		return nil
	})
}
