package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// Canceller is a store that can cancel a job before it runs: Tombstone
// writes a CANCELLED marker unless the job ran or runs (ErrProcessed,
// ErrFailed, ErrLeaseHeld). RunStore proves its rules when the store has
// it.
type Canceller interface {
	Tombstone(ctx context.Context, k engine.Key, due time.Time) (engine.Record, error)
}

// Clock is a settable clock shared by a store and the suite.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// RunStore runs the conformance suite every engine.Store must pass, on
// stores newStore makes: each empty, reading clock as its time. The
// in-memory store and the DynamoDB store pass it, so a unit test on the
// in-memory one proves what the real one does; a store of your own that
// passes it keeps the runner's promises. A store that is a Canceller is
// held to the cancellation rules too.
func RunStore(t *testing.T, newStore func(t *testing.T, clock *Clock) engine.Store) {
	ctx := context.Background()
	var seq atomic.Int64
	key := func() engine.Key {
		return engine.Key{Type: "acme.widget-made.v1", JobID: fmt.Sprintf("m-%d-%d", time.Now().UnixNano(), seq.Add(1))}
	}
	_, canCancel := newStore(t, NewClock(time.Now())).(Canceller)
	setup := func(t *testing.T) (under, *Clock) {
		clock := NewClock(time.Now())
		return under{newStore(t, clock), t, clock}, clock
	}
	// leasedByA is a new store and key, the key leased by owner "a" for a
	// minute.
	leasedByA := func(t *testing.T) (under, *Clock, engine.Key) {
		t.Helper()
		s, clock := setup(t)
		k := key()
		if _, err := s.Lease(ctx, k, "a", clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		return s, clock, k
	}
	// claimed is a new store and key, the key claimed by a plain claim.
	claimed := func(t *testing.T) (under, *Clock, engine.Key) {
		t.Helper()
		s, clock := setup(t)
		k := key()
		if _, err := s.Claim(ctx, k, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		return s, clock, k
	}

	t.Run("PeekMissing", func(t *testing.T) {
		s, _ := setup(t)
		if _, ok, err := s.Peek(ctx, key()); err != nil || ok {
			t.Fatalf("Peek(missing) = ok %v, err %v; want false, nil", ok, err)
		}
	})

	t.Run("ClaimThenPeek", func(t *testing.T) {
		s, _ := setup(t)
		k := key()
		if _, err := s.Claim(ctx, k, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		r, ok, err := s.Peek(ctx, k)
		if err != nil || !ok || !r.Processed() {
			t.Fatalf("Peek after claim = %+v ok %v err %v; want processed", r, ok, err)
		}
	})

	t.Run("SecondClaimIsSuccess", func(t *testing.T) {
		s, _ := setup(t)
		k := key()
		for i := range 3 {
			won, err := s.Claim(ctx, k, "", time.Time{})
			if err != nil || won != (i == 0) {
				t.Fatalf("claim %d = %v, %v; want won only the first time and no error (already processed is success)", i, won, err)
			}
		}
	})

	t.Run("ConcurrentClaimsOneWinner", func(t *testing.T) {
		s, _ := setup(t)
		k := key()
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				won, err := s.Claim(ctx, k, "", time.Time{})
				if err != nil {
					t.Errorf("claim: %v", err)
				}
				if won {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("%d of 50 concurrent claims won; want exactly 1", got)
		}
	})

	t.Run("ConcurrentLeasesOneWinner", func(t *testing.T) {
		s, clock := setup(t)
		k := key()
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("w%d", i)
				if _, err := s.Lease(ctx, k, owner, clock.Now().Add(time.Minute)); err == nil {
					wins.Add(1)
					if _, err := s.Claim(ctx, k, owner, time.Time{}); err != nil {
						t.Errorf("winner claim: %v", err)
					}
				} else if !errors.Is(err, engine.ErrLeaseHeld) && !errors.Is(err, engine.ErrProcessed) {
					t.Errorf("lease: %v", err)
				}
			}()
		}
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("%d of 50 concurrent leases won; want exactly 1", got)
		}
	})

	t.Run("PeekBatch", func(t *testing.T) {
		s, _ := setup(t)
		var keys []engine.Key
		for i := range 10 {
			k := key()
			keys = append(keys, k)
			if i%3 == 0 {
				if _, err := s.Claim(ctx, k, "", time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := s.PeekBatch(ctx, append(keys, keys[0])) // a duplicate key too
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4 {
			t.Fatalf("PeekBatch found %d markers; want 4 (keys 0, 3, 6, 9)", len(got))
		}
		for i, k := range keys {
			_, ok := got[k]
			if ok != (i%3 == 0) {
				t.Errorf("key %d found=%v; want %v", i, ok, i%3 == 0)
			}
		}
	})

	t.Run("LeaseBlocksTwinUntilExpiry", func(t *testing.T) {
		s, clock, k := leasedByA(t)
		old, err := s.Lease(ctx, k, "b", clock.Now().Add(time.Minute))
		if !errors.Is(err, engine.ErrLeaseHeld) || old.Owner != "a" {
			t.Fatalf("twin lease = %+v, %v; want ErrLeaseHeld with owner a", old, err)
		}
		if _, err := s.Lease(ctx, k, "a", clock.Now().Add(2*time.Minute)); err != nil {
			t.Fatalf("owner re-lease: %v", err)
		}
		clock.Advance(3 * time.Minute) // a crashed holder never blocks forever
		if _, err := s.Lease(ctx, k, "b", clock.Now().Add(time.Minute)); err != nil {
			t.Fatalf("lease after expiry: %v", err)
		}
	})

	t.Run("StaleHolderCannotComplete", func(t *testing.T) {
		s, clock, k := leasedByA(t)
		clock.Advance(2 * time.Minute)
		if _, err := s.Lease(ctx, k, "b", clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, k, "a", time.Time{}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("stale claim = %v; want ErrLeaseLost", err)
		}
		if err := s.Release(ctx, k, "a"); err != nil {
			t.Fatalf("stale release = %v; want nil (nothing to release)", err)
		}
		r, ok, _ := s.Peek(ctx, k)
		if !ok || r.Owner != "b" || r.State != engine.StateLeased {
			t.Fatalf("after stale writes marker = %+v; want b's lease intact", r)
		}
		if _, err := s.Claim(ctx, k, "b", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, k, "a", time.Time{}); err != nil {
			t.Fatalf("stale claim after completion = %v; want nil (already processed)", err)
		}
	})

	t.Run("LeaseOnProcessedDoublesAsPeek", func(t *testing.T) {
		s, clock, k := claimed(t)
		old, err := s.Lease(ctx, k, "a", clock.Now().Add(time.Minute))
		if !errors.Is(err, engine.ErrProcessed) || !old.Processed() {
			t.Fatalf("lease on claimed marker = %+v, %v; want ErrProcessed", old, err)
		}
	})

	t.Run("ReleaseFreesForRetry", func(t *testing.T) {
		s, clock, k := leasedByA(t) // the clock stands still: only the release frees it
		if err := s.Release(ctx, k, "a"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Peek(ctx, k); ok {
			t.Fatal("marker still present after release")
		}
		if _, err := s.Lease(ctx, k, "b", clock.Now().Add(time.Minute)); err != nil {
			t.Fatalf("lease after release: %v", err)
		}
	})

	t.Run("ExpiredMarkerIsAbsentEvenIfNotDeleted", func(t *testing.T) {
		s, clock, k := claimed(t)
		r, _, _ := s.Peek(ctx, k)
		if d := r.ExpiresAt.Sub(clock.Now()); d < 29*24*time.Hour {
			t.Fatalf("expiresAt only %v ahead; want the 30-day retention", d)
		}
		clock.Advance(engine.DefaultRetention + time.Hour)
		if _, ok, _ := s.Peek(ctx, k); ok {
			t.Fatal("Peek returned a marker past its expiresAt; reads must not trust TTL deletion")
		}
		if got, _ := s.PeekBatch(ctx, []engine.Key{k}); len(got) != 0 {
			t.Fatal("PeekBatch returned an expired marker")
		}
	})

	// A job run before its time (an operator's run-now of a job due in 200
	// days) is still guarded when the copy that waited for that time
	// arrives: every settled marker lives its retention past the later of
	// its write and the job's run time.
	t.Run("SettledMarkerOfALaterJobOutlivesItsRunTime", func(t *testing.T) {
		s, clock := setup(t)
		due := clock.Now().Add(200 * 24 * time.Hour)
		done, failed, cancelled := key(), key(), key()
		if _, err := s.Lease(ctx, done, "a", clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if won, err := s.Claim(ctx, done, "a", due); err != nil || !won {
			t.Fatalf("claim = %v, %v", won, err)
		}
		if err := s.Fail(ctx, failed, "", due); err != nil {
			t.Fatalf("fail: %v", err)
		}
		keys := []engine.Key{done, failed}
		if canCancel {
			if _, err := s.Tombstone(ctx, cancelled, due); err != nil {
				t.Fatalf("tombstone: %v", err)
			}
			keys = append(keys, cancelled)
		}
		clock.Advance(due.Sub(clock.Now()) + engine.DefaultRetention - time.Hour)
		got, err := s.PeekBatch(ctx, keys)
		if err != nil || len(got) != len(keys) {
			t.Fatalf("%d of %d markers left %s after the run time (%v); want every one", len(got), len(keys), engine.DefaultRetention-time.Hour, err)
		}
		clock.Advance(2 * time.Hour)
		if got, _ := s.PeekBatch(ctx, keys); len(got) != 0 {
			t.Fatalf("%d markers outlived their retention past the run time", len(got))
		}
	})

	t.Run("ARetriedWriteFindsItsOwnItem", func(t *testing.T) {
		// The SDK retries a write whose response was lost; the retry fails
		// its condition against the item the first try wrote. That is a
		// success, never a conflict with itself.
		s, clock := setup(t)
		k := key()
		for range 2 {
			if _, err := s.Lease(ctx, k, "a", clock.Now().Add(time.Minute)); err != nil {
				t.Fatalf("repeated lease: %v", err)
			}
		}
		for i := range 2 {
			if won, err := s.Claim(ctx, k, "a", time.Time{}); err != nil || !won {
				t.Fatalf("claim try %d = %v, %v; want won (its own marker)", i, won, err)
			}
		}
		if won, err := s.Claim(ctx, k, "b", time.Time{}); err != nil || won {
			t.Fatalf("another owner's claim = %v, %v; want false, nil (already processed)", won, err)
		}
	})

	su := storeSuite{ctx: ctx, key: key, setup: setup, leasedByA: leasedByA, claimed: claimed, canCancel: canCancel}
	if canCancel {
		su.cancellation(t)
	}
	su.failures(t)
	su.kept(t)
}

// under is the store under test, with the reads and writes the suite uses
// beyond engine.Store.
type under struct {
	engine.Store
	t     *testing.T
	clock *Clock
}

// Lease takes the lease for owner until until.
func (u under) Lease(ctx context.Context, k engine.Key, owner string, until time.Time) (engine.Record, error) {
	return u.Store.Lease(ctx, k, engine.Mark{Owner: owner, Until: until})
}

// Claim claims k for owner, its job due at due: the marker lives its
// retention past the later of now and due, as the runner asks.
func (u under) Claim(ctx context.Context, k engine.Key, owner string, due time.Time) (bool, error) {
	return u.Store.Claim(ctx, k, u.settled(owner, due))
}

// Fail marks k failed for owner, its job due at due.
func (u under) Fail(ctx context.Context, k engine.Key, owner string, due time.Time) error {
	return u.Store.Fail(ctx, k, u.settled(owner, due))
}

// settled is the mark of a settling write by owner of a job due at due.
func (u under) settled(owner string, due time.Time) engine.Mark {
	return engine.Mark{Owner: owner, Expires: engine.SettledUntil(u.clock.Now(), due, engine.DefaultRetention)}
}

// Peek reads one marker through PeekBatch.
func (u under) Peek(ctx context.Context, k engine.Key) (engine.Record, bool, error) {
	got, err := u.PeekBatch(ctx, []engine.Key{k})
	r, ok := got[k]
	return r, ok, err
}

// Tombstone cancels k; only a Canceller's subtests call it.
func (u under) Tombstone(ctx context.Context, k engine.Key, due time.Time) (engine.Record, error) {
	c, ok := u.Store.(Canceller)
	if !ok {
		u.t.Fatalf("%T is not a Canceller", u.Store)
	}
	return c.Tombstone(ctx, k, due)
}
