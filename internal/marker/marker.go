// Package marker is the effect-level idempotency record: one item per
// (handler, message key) that says a job's effect has been done, is being
// done by a lease holder, failed after its claim, or must never run
// (cancelled). See docs/contract.md.
//
// The rules:
//   - Claim is a conditional put. A failed condition means "already
//     processed" and is success, not an error.
//   - A lease is a conditional write with an owner and an expiry (the Lambda
//     deadline), so a concurrent twin does not run the effect at the same
//     time and a crashed holder never blocks forever.
//   - Completion, failure and release are conditional on the owner: a holder
//     whose lease expired can never overwrite a newer holder's work.
//   - A write whose response was lost and that the SDK retried finds its own
//     item: the retry is a success, never a conflict with itself.
//   - A cancelled job's marker is a tombstone: peeks see it and the job is
//     skipped like an already-processed one.
//   - Reads treat an item past its expiresAt as absent; they never trust TTL
//     deletion, which can lag by days.
package marker

import (
	"errors"
	"strings"
	"time"
)

// Attribute names of a marker item. HandlerName and MessageKey are the table's
// hash and range keys; HandlerName holds PartitionKey, one value per job, so
// no job type's markers share a partition (a hot key past about 1,000 writes
// a second), and MessageKey the job's message key.
const (
	AttrHandler     = "HandlerName"
	AttrMessageKey  = "MessageKey"
	AttrState       = "state"
	AttrOwner       = "owner"
	AttrLeaseUntil  = "leaseUntil"
	AttrLeasedAt    = "leasedAt"
	AttrProcessedAt = "processedAt"
	AttrExpiresAt   = "expiresAt"
)

// DefaultRetention is how long a settled marker lives: longer than queue
// retention plus the DLQ redrive window.
const DefaultRetention = 30 * 24 * time.Hour

// Key names one marker: the handler (the job type) and the message key (the
// job's messageId).
type Key struct {
	Handler    string
	MessageKey string
}

// PartitionKey is the value of k's hash key (AttrHandler):
// "<handler>#<message key>", one per job.
func PartitionKey(k Key) string { return k.Handler + "#" + k.MessageKey }

// keyOf is the key of a marker item from its two key attributes: the handler
// is the hash key without "#<message key>".
func keyOf(partition, messageKey string) Key {
	return Key{Handler: strings.TrimSuffix(partition, "#"+messageKey), MessageKey: messageKey}
}

// State is the state of a marker item.
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

// Errors returned by the stores. Callers match them with errors.Is.
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

// settledErr is the error a write that must not overwrite old returns.
func settledErr(old Record) error {
	switch old.State {
	case StateDone:
		return ErrProcessed
	case StateCancelled:
		return ErrCancelled
	case StateFailed:
		return ErrFailed
	}
	return ErrLeaseHeld
}
