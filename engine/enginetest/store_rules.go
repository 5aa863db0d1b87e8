package enginetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// storeSuite is what RunStore's subtests share: a fresh store and key,
// and stores with a key already leased or claimed.
type storeSuite struct {
	ctx       context.Context
	key       func() engine.Key
	setup     func(t *testing.T) (under, *Clock)
	leasedByA func(t *testing.T) (under, *Clock, engine.Key)
	claimed   func(t *testing.T) (under, *Clock, engine.Key)
	// canCancel: the store is a Canceller.
	canCancel bool
}

// cancellation holds a Canceller to the cancellation rules.
func (su storeSuite) cancellation(t *testing.T) {
	ctx := su.ctx
	key := su.key
	setup := su.setup
	t.Run("TombstoneStopsTheJob", func(t *testing.T) {
		s, clock := setup(t)
		k := key()
		for range 2 { // repeating a cancel is a success
			if _, err := s.Tombstone(ctx, k, time.Time{}); err != nil {
				t.Fatalf("tombstone: %v", err)
			}
		}
		r, ok, err := s.Peek(ctx, k)
		if err != nil || !ok || r.State != engine.StateCancelled || !r.Settled() || r.Processed() {
			t.Fatalf("peek = %+v %v %v; want a settled, unprocessed tombstone", r, ok, err)
		}
		if _, err := s.Lease(ctx, k, "a", clock.Now().Add(time.Minute)); !errors.Is(err, engine.ErrCancelled) {
			t.Fatalf("lease on a tombstone = %v; want ErrCancelled", err)
		}
		if won, err := s.Claim(ctx, k, "", time.Time{}); err != nil || won {
			t.Fatalf("claim on a tombstone = %v, %v; want false, nil", won, err)
		}
		if r, _, _ := s.Peek(ctx, k); r.State != engine.StateCancelled {
			t.Fatalf("tombstone overwritten: %+v", r)
		}
	})

	t.Run("TombstoneRefusesWhatRanOrRuns", func(t *testing.T) {
		s, clock := setup(t)
		done, running, crashed := key(), key(), key()
		if _, err := s.Claim(ctx, done, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Tombstone(ctx, done, time.Time{}); !errors.Is(err, engine.ErrProcessed) {
			t.Fatalf("cancel of a processed job = %v; want ErrProcessed", err)
		}
		if _, err := s.Lease(ctx, running, "a", clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Tombstone(ctx, running, time.Time{}); !errors.Is(err, engine.ErrLeaseHeld) {
			t.Fatalf("cancel of a running job = %v; want ErrLeaseHeld", err)
		}
		if _, err := s.Lease(ctx, crashed, "a", clock.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		if _, err := s.Tombstone(ctx, crashed, time.Time{}); err != nil {
			t.Fatalf("cancel after a crashed holder's lease expired = %v; want nil", err)
		}
	})
}

// failures holds a store to the rules of an effect that failed after its
// claim.
func (su storeSuite) failures(t *testing.T) {
	canCancel := su.canCancel
	ctx := su.ctx
	key := su.key
	setup := su.setup
	leasedByA := su.leasedByA
	t.Run("FailAfterClaimWaitsForRedrive", func(t *testing.T) {
		s, clock, k := leasedByA(t)
		if _, err := s.Claim(ctx, k, "a", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Fail(ctx, k, "b", time.Time{}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("fail by a non-owner = %v; want ErrLeaseLost", err)
		}
		for range 2 {
			if err := s.Fail(ctx, k, "a", time.Time{}); err != nil {
				t.Fatalf("fail by the owner: %v", err)
			}
		}
		r, _, _ := s.Peek(ctx, k)
		if r.State != engine.StateFailed || !r.Settled() || r.Processed() {
			t.Fatalf("after fail = %+v; want FAILED, settled, not processed", r)
		}
		if _, err := s.Lease(ctx, k, "c", clock.Now().Add(time.Minute)); !errors.Is(err, engine.ErrFailed) {
			t.Fatalf("lease on a failed marker = %v; want ErrFailed", err)
		}
	})

	// A job that failed on its final attempt: its worker turns its own
	// lease into FAILED, so another copy of the job is refused until a
	// redrive; nobody else's lease can be failed.
	t.Run("FailUnderLeaseOnTheFinalAttempt", func(t *testing.T) {
		s, clock, k := leasedByA(t)
		if err := s.Fail(ctx, k, "b", time.Time{}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("fail of a's lease by b = %v; want ErrLeaseLost", err)
		}
		if err := s.Fail(ctx, k, "", time.Time{}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("unowned fail of a's active lease = %v; want ErrLeaseLost", err)
		}
		for range 2 { // the second is a retry after a lost response
			if err := s.Fail(ctx, k, "a", time.Time{}); err != nil {
				t.Fatalf("fail by the lease holder: %v", err)
			}
		}
		if _, err := s.Lease(ctx, k, "c", clock.Now().Add(time.Minute)); !errors.Is(err, engine.ErrFailed) {
			t.Fatalf("lease by another copy after the fail = %v; want ErrFailed", err)
		}
		if _, err := s.Claim(ctx, k, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := s.Peek(ctx, k); r.State != engine.StateFailed {
			t.Fatalf("a plain claim overwrote the failed marker: %+v", r)
		}
	})

	// A dead letter whose job no worker holds: the marker is failed without
	// an owner when there is none or only an expired lease, never over a
	// done, cancelled or actively leased one.
	t.Run("FailWithoutOwner", func(t *testing.T) {
		s, clock := setup(t)
		none, crashed, done, cancelled := key(), key(), key(), key()
		if _, err := s.Lease(ctx, crashed, "a", clock.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, done, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		settled := []engine.Key{done}
		if canCancel {
			if _, err := s.Tombstone(ctx, cancelled, time.Time{}); err != nil {
				t.Fatal(err)
			}
			settled = append(settled, cancelled)
		}
		clock.Advance(time.Minute)
		for _, k := range []engine.Key{none, crashed} {
			if err := s.Fail(ctx, k, "", time.Time{}); err != nil {
				t.Fatalf("unowned fail of %s: %v", k.JobID, err)
			}
			if r, _, _ := s.Peek(ctx, k); r.State != engine.StateFailed {
				t.Fatalf("after an unowned fail: %+v; want FAILED", r)
			}
		}
		for _, k := range settled {
			before, _, _ := s.Peek(ctx, k)
			if err := s.Fail(ctx, k, "", time.Time{}); !errors.Is(err, engine.ErrLeaseLost) {
				t.Fatalf("unowned fail of a %s marker = %v; want ErrLeaseLost", before.State, err)
			}
			if r, _, _ := s.Peek(ctx, k); r.State != before.State {
				t.Fatalf("fail overwrote a %s marker: %+v", before.State, r)
			}
		}
	})
}

// kept holds a store to what a claim and a lease keep: the fingerprint and
// the result (engine.Do's), read back by a peek; and a stale owner's claim
// never overwrites the newer holder's result.
func (su storeSuite) kept(t *testing.T) {
	ctx := su.ctx
	t.Run("ClaimKeepsFingerprintAndResult", func(t *testing.T) {
		s, clock := su.setup(t)
		k := su.key()
		if _, err := s.Store.Lease(ctx, k, engine.Mark{Owner: "a", Until: clock.Now().Add(time.Minute), Fingerprint: "fp-1"}); err != nil {
			t.Fatal(err)
		}
		if r, _, err := s.Peek(ctx, k); err != nil || r.Fingerprint != "fp-1" {
			t.Fatalf("lease: %+v, %v; want its fingerprint kept", r, err)
		}
		result := []byte(`{"id":"ch-1","amount":12}`)
		if won, err := s.Store.Claim(ctx, k, engine.Mark{Owner: "a", Fingerprint: "fp-1", Result: result, Expires: clock.Now().Add(time.Hour)}); err != nil || !won {
			t.Fatalf("claim: %v, %v", won, err)
		}
		r, ok, err := s.Peek(ctx, k)
		if err != nil || !ok || !r.Processed() || r.Fingerprint != "fp-1" || string(r.Result) != string(result) {
			t.Fatalf("peek: %+v, %v, %v; want done with the fingerprint and the result", r, ok, err)
		}
	})
	t.Run("StaleClaimNeverOverwritesTheNewerResult", func(t *testing.T) {
		s, clock := su.setup(t)
		k := su.key()
		if _, err := s.Store.Lease(ctx, k, engine.Mark{Owner: "stale", Until: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		if _, err := s.Store.Lease(ctx, k, engine.Mark{Owner: "newer", Until: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatalf("the newer holder's lease after the stale one's ran out: %v", err)
		}
		if _, err := s.Store.Claim(ctx, k, engine.Mark{Owner: "stale", Result: []byte(`"stale"`)}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("stale claim while the newer holds the lease = %v; want ErrLeaseLost", err)
		}
		if err := s.Store.Release(ctx, k, "stale"); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := s.Peek(ctx, k); r.State != engine.StateLeased || r.Owner != "newer" {
			t.Fatalf("after the stale release: %+v; want the newer lease untouched", r)
		}
		if won, err := s.Store.Claim(ctx, k, engine.Mark{Owner: "newer", Result: []byte(`"newer"`), Expires: clock.Now().Add(time.Hour)}); err != nil || !won {
			t.Fatalf("newer claim: %v, %v", won, err)
		}
		if won, err := s.Store.Claim(ctx, k, engine.Mark{Owner: "stale", Result: []byte(`"stale"`)}); err != nil || won {
			t.Fatalf("stale claim after the newer's = %v, %v; want (false, nil): already done", won, err)
		}
		if r, _, _ := s.Peek(ctx, k); string(r.Result) != `"newer"` {
			t.Fatalf("kept result %s; want the newer holder's", r.Result)
		}
	})
}
