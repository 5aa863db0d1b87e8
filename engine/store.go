package engine

import (
	"context"
	"errors"
	"time"
)

// Key names one marker: the kind's name and the job's key. A store lays
// them out as it likes (dynamostore: the hash key "<name>#<key>" and the
// range key the key).
type Key struct {
	// Type is the kind's name (Kind.Name), e.g. "orders.ship".
	Type string
	// JobID is the job's key (Kind.Key of its payload; the bundle's job
	// id).
	JobID string
}

// State is the state of a marker.
type State string

// The marker states.
const (
	// StateLeased: a worker holds the lease and may be running the effect.
	StateLeased State = "LEASED"
	// StateDone: the effect is done (claimed).
	StateDone State = "DONE"
	// StateFailed: a claim-then-effect job's effect failed after its claim;
	// the job is dead-lettered and only a redrive (which clears this
	// marker) runs it again.
	StateFailed State = "FAILED"
	// StateCancelled: the job was cancelled before it ran; it never runs.
	StateCancelled State = "CANCELLED"
)

// Record is a marker as read.
type Record struct {
	Key   Key
	State State
	// Owner is the lease holder, or the claimer of a settled marker.
	Owner      string
	LeaseUntil time.Time
	// LeasedAt is when the lease was taken (zero for a settled marker, or a
	// lease written before it was recorded).
	LeasedAt    time.Time
	ProcessedAt time.Time
	ExpiresAt   time.Time
	// Fingerprint is the payload fingerprint the marker was written with
	// (Mark.Fingerprint), "" for none.
	Fingerprint string
	// Result is what a claim stored with the marker (Mark.Result): Do's
	// result. Nil for none.
	Result []byte
}

// Mark is what a write of a marker carries besides its key.
type Mark struct {
	// Owner is the writer: the lease holder, or the claimer ("" for a
	// claim or failure written without a lease).
	Owner string
	// Until is when a lease ends (Lease only).
	Until time.Time
	// Expires is when the marker may be forgotten: a store reads it as
	// absent from then on. The runner sets it to SettledUntil(now, due,
	// retention).
	Expires time.Time
	// Fingerprint identifies the payload's content (the hex SHA-256 of
	// Kind.Fingerprint's bytes); "" for none. Lease and Claim keep it.
	Fingerprint string
	// Result is kept by Claim with the done marker (Do's result); nil for
	// none.
	Result []byte
}

// DefaultRetention is how long a settled marker lives: longer than queue
// retention plus the dead-letter redrive window.
const DefaultRetention = 30 * 24 * time.Hour

// SettledUntil is when a marker settled at now, of a job due at due (zero:
// none), expires in a store that keeps settled markers for retention: the
// retention after the later of the two.
func SettledUntil(now, due time.Time, retention time.Duration) time.Time {
	if due.After(now) {
		return due.Add(retention)
	}
	return now.Add(retention)
}

// Conflict is the error a store returns for a write that finds r and must
// not overwrite it: ErrProcessed, ErrCancelled or ErrFailed for a settled
// marker, ErrLeaseHeld for a lease.
func (r Record) Conflict() error {
	switch r.State {
	case StateDone:
		return ErrProcessed
	case StateCancelled:
		return ErrCancelled
	case StateFailed:
		return ErrFailed
	}
	return ErrLeaseHeld
}

// Processed reports whether the effect is recorded as done.
func (r Record) Processed() bool { return r.State == StateDone }

// Settled reports whether no worker may run the job's effect: it is done,
// failed after its claim, or cancelled.
func (r Record) Settled() bool {
	return r.State == StateDone || r.State == StateFailed || r.State == StateCancelled
}

// LeaseActive reports whether a lease is held and not yet expired at now.
func (r Record) LeaseActive(now time.Time) bool {
	return r.State == StateLeased && now.Before(r.LeaseUntil)
}

// Errors a Store returns. The runner matches them with errors.Is, so a
// store wraps them rather than inventing its own.
var (
	// ErrProcessed: the marker is already claimed. The effect must not run
	// again.
	ErrProcessed = errors.New("marker: already processed")
	// ErrCancelled: the job was cancelled. Its effect must never run.
	ErrCancelled = errors.New("marker: job cancelled")
	// ErrFailed: a claim-then-effect job's effect failed after its claim; it
	// waits for a redrive.
	ErrFailed = errors.New("marker: effect failed after claim")
	// ErrLeaseHeld: another owner holds an unexpired lease. Retry later.
	ErrLeaseHeld = errors.New("marker: lease held by another worker")
	// ErrLeaseLost: another worker took over after this owner's lease
	// expired. The effect this owner ran stands; the newer holder completes
	// the marker.
	ErrLeaseLost = errors.New("marker: lease lost to another worker")
)

// Store is the effect marker store: one marker per job that says its effect
// is done, is being done by a lease holder, failed after its claim, or must
// never run. The rules every Store keeps (the conformance suite of package
// enginetest proves them):
//   - Claim is a conditional put: a marker already claimed is (false, nil),
//     success, not an error;
//   - Lease is conditional, with an owner and an expiry, so a concurrent
//     twin does not run the effect at the same time and a crashed holder
//     never blocks for ever;
//   - Claim, Fail and Release by an owner whose lease was taken over return
//     ErrLeaseLost, and never overwrite the newer holder's work;
//   - a write retried after its response was lost finds its own item: the
//     retry is a success, never a conflict with itself;
//   - a marker past its expiry reads as absent;
//   - a marker lives until the Mark.Expires it was written with, which the
//     runner sets to its retention past the later of the write and the
//     job's run time (SettledUntil), so a job run before its time (an
//     operator's run-now) is still guarded when a copy that waited for that
//     time arrives;
//   - a claim keeps its fingerprint and result, and a lease its
//     fingerprint, for the peeks that follow.
type Store interface {
	// PeekBatch reads the markers of keys in one consistent read; a key
	// without a marker is absent from the map.
	PeekBatch(ctx context.Context, keys []Key) (map[Key]Record, error)
	// Lease takes or renews the lease on k for m.Owner until m.Until,
	// keeping m.Fingerprint. A settled marker is ErrProcessed, ErrCancelled
	// or ErrFailed; another owner's live lease is ErrLeaseHeld. On a
	// conflict the marker found is returned with the error (a peek).
	Lease(ctx context.Context, k Key, m Mark) (Record, error)
	// Claim marks k done with m.Fingerprint and m.Result until m.Expires;
	// it reports false when it already was done (or settled otherwise).
	Claim(ctx context.Context, k Key, m Mark) (bool, error)
	// Fail marks k FAILED until m.Expires after a claim-then-effect job's
	// effect failed (or its final attempt did).
	Fail(ctx context.Context, k Key, m Mark) error
	// Release gives up owner's lease on k.
	Release(ctx context.Context, k Key, owner string) error
}
