package marker

import (
	"context"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/ddb"
)

// Memory is an in-memory marker store with the same rules as Dynamo, for unit
// tests and benchmarks of the code that uses markers. The conformance suite in
// markertest runs against both.
type Memory struct {
	mu    sync.Mutex
	items map[Key]Record
	// Retention is how long a settled marker lives (DefaultRetention if 0).
	Retention time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Err, when set, is returned by every call instead of doing it.
	Err error
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{items: map[Key]Record{}} }

func (m *Memory) retention() time.Duration { return ddb.DurationOr(m.Retention, DefaultRetention) }

// live returns the record under k unless it is absent or expired. Callers hold
// mu.
func (m *Memory) live(k Key, now time.Time) (Record, bool) {
	r, ok := m.items[k]
	if !ok || (!r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)) {
		return Record{}, false
	}
	return r, true
}

// do runs f under the lock with the current time, unless Err is set.
func (m *Memory) do(f func(now time.Time) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	return f(ddb.Now(m.Now))
}

// Peek reads one marker.
func (m *Memory) Peek(_ context.Context, k Key) (r Record, ok bool, err error) {
	err = m.do(func(now time.Time) error { r, ok = m.live(k, now); return nil })
	return r, ok, err
}

// PeekBatch reads many markers.
func (m *Memory) PeekBatch(_ context.Context, keys []Key) (map[Key]Record, error) {
	out := make(map[Key]Record, len(keys))
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
// Dynamo.Lease.
func (m *Memory) Lease(_ context.Context, k Key, owner string, until time.Time) (rec Record, err error) {
	err = m.do(func(now time.Time) error {
		if old, ok := m.live(k, now); ok && (old.State != StateLeased || (old.Owner != owner && old.LeaseActive(now))) {
			rec = old
			return settledErr(old)
		}
		rec = Record{Key: k, State: StateLeased, Owner: owner, LeaseUntil: until, LeasedAt: now.Truncate(time.Millisecond), ExpiresAt: until.Add(m.retention())}
		m.items[k] = rec
		return nil
	})
	return rec, err
}

// Claim records k as processed; see Dynamo.Claim.
func (m *Memory) Claim(_ context.Context, k Key, owner string) (won bool, err error) {
	err = m.do(func(now time.Time) error {
		if old, ok := m.live(k, now); ok && !(owner != "" && old.Owner == owner && (old.State == StateLeased || old.State == StateDone)) {
			if old.Settled() {
				return nil
			}
			return ErrLeaseLost
		}
		m.items[k] = Record{Key: k, State: StateDone, Owner: owner, ProcessedAt: now, ExpiresAt: now.Add(m.retention())}
		won = true
		return nil
	})
	return won, err
}

// Fail records that k's job failed; see Dynamo.Fail.
func (m *Memory) Fail(_ context.Context, k Key, owner string) error {
	return m.do(func(now time.Time) error {
		old, ok := m.live(k, now)
		var may bool
		switch {
		case ok && old.State == StateFailed:
			return nil
		case owner != "":
			may = ok && old.Owner == owner && (old.State == StateDone || old.State == StateLeased)
		default:
			may = !ok || (old.State == StateLeased && !old.LeaseActive(now))
		}
		if !may {
			return ErrLeaseLost
		}
		m.items[k] = Record{Key: k, State: StateFailed, Owner: owner, ProcessedAt: now, ExpiresAt: now.Add(m.retention())}
		return nil
	})
}

// Tombstone marks k cancelled; see Dynamo.Tombstone.
func (m *Memory) Tombstone(_ context.Context, k Key) (rec Record, err error) {
	err = m.do(func(now time.Time) error {
		if old, ok := m.live(k, now); ok && old.State != StateCancelled && (old.State != StateLeased || old.LeaseActive(now)) {
			rec = old
			return settledErr(old)
		}
		rec = Record{Key: k, State: StateCancelled, ProcessedAt: now, ExpiresAt: now.Add(m.retention())}
		m.items[k] = rec
		return nil
	})
	return rec, err
}

// Release gives up owner's lease on k.
func (m *Memory) Release(_ context.Context, k Key, owner string) error {
	return m.do(func(time.Time) error {
		if old, ok := m.items[k]; ok && old.State == StateLeased && old.Owner == owner {
			delete(m.items, k)
		}
		return nil
	})
}

// ResetFailed deletes k when it is in StateFailed (a redrive runs the effect
// again); see Dynamo.ResetFailed.
func (m *Memory) ResetFailed(_ context.Context, k Key) error {
	return m.do(func(time.Time) error {
		if old, ok := m.items[k]; ok && old.State == StateFailed {
			delete(m.items, k)
		}
		return nil
	})
}
