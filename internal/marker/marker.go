// Package marker is the effect-level idempotency record: one item per
// (handler, message key) that says a job's effect has been done, or is being
// done by a lease holder.
//
// The rules:
//   - Claim is a conditional put. A failed condition means "already
//     processed" and is success, not an error.
//   - A lease is a conditional write with an owner and an expiry (the Lambda
//     deadline), so a concurrent twin does not run the effect at the same
//     time and a crashed holder never blocks forever.
//   - Completion and release are conditional on the owner: a holder whose
//     lease expired can never overwrite a newer holder's work.
//   - Reads treat an item past its expiresAt as absent; they never trust TTL
//     deletion, which can lag by days.
package marker

import (
	"errors"
	"time"
)

// Attribute names of a marker item. HandlerName and MessageKey are the table's
// hash and range keys.
const (
	AttrHandler     = "HandlerName"
	AttrMessageKey  = "MessageKey"
	AttrState       = "state"
	AttrOwner       = "owner"
	AttrLeaseUntil  = "leaseUntil"
	AttrProcessedAt = "processedAt"
	AttrExpiresAt   = "expiresAt"
)

// DefaultRetention is how long a claimed marker lives: longer than queue
// retention (14 days) plus the DLQ redrive window.
const DefaultRetention = 30 * 24 * time.Hour

// Key names one marker: the handler (the job type) and the message key (the
// job's messageId).
type Key struct {
	Handler    string
	MessageKey string
}

// State is the state of a marker item.
type State string

// The marker states.
const (
	// StateLeased: a worker holds the lease and may be running the effect.
	StateLeased State = "LEASED"
	// StateDone: the effect is done (claimed).
	StateDone State = "DONE"
)

// Record is a marker as read.
type Record struct {
	Key         Key
	State       State
	Owner       string
	LeaseUntil  time.Time
	ProcessedAt time.Time
	ExpiresAt   time.Time
}

// Processed reports whether the effect is recorded as done.
func (r Record) Processed() bool { return r.State == StateDone }

// LeaseActive reports whether a lease is held and not yet expired at now.
func (r Record) LeaseActive(now time.Time) bool {
	return r.State == StateLeased && now.Before(r.LeaseUntil)
}

// Errors returned by Lease and Claim. Callers match them with errors.Is.
var (
	// ErrProcessed: Lease found the marker already claimed. The effect must
	// not run again.
	ErrProcessed = errors.New("marker: already processed")
	// ErrLeaseHeld: Lease found another owner's unexpired lease. Retry later.
	ErrLeaseHeld = errors.New("marker: lease held by another worker")
	// ErrLeaseLost: Claim with an owner found that another worker took over
	// after this owner's lease expired. The effect this owner ran stands; the
	// newer holder completes the marker.
	ErrLeaseLost = errors.New("marker: lease lost to another worker")
)
