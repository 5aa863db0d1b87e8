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
	"strings"

	"github.com/runstwice/runstwice/engine"
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

// DefaultRetention is how long a settled marker lives (engine.DefaultRetention).
const DefaultRetention = engine.DefaultRetention

// The marker's types and errors are the engine's (package engine): this
// package is the DynamoDB implementation behind the public adapter, and the
// bundle's own tooling (reset, redrive) on top of it.
type (
	// Key names one marker (engine.Key).
	Key = engine.Key
	// State is the state of a marker item (engine.State).
	State = engine.State
	// Record is a marker as read (engine.Record).
	Record = engine.Record
)

// The marker states (engine's).
const (
	StateLeased    = engine.StateLeased
	StateDone      = engine.StateDone
	StateFailed    = engine.StateFailed
	StateCancelled = engine.StateCancelled
)

// Errors returned by the stores (engine's). Callers match them with
// errors.Is.
var (
	ErrProcessed = engine.ErrProcessed
	ErrCancelled = engine.ErrCancelled
	ErrFailed    = engine.ErrFailed
	ErrLeaseHeld = engine.ErrLeaseHeld
	ErrLeaseLost = engine.ErrLeaseLost
)

// PartitionKey is the value of k's hash key (AttrHandler):
// "<handler>#<message key>", one per job.
func PartitionKey(k Key) string { return k.Handler + "#" + k.MessageKey }

// keyOf is the key of a marker item from its two key attributes: the handler
// is the hash key without "#<message key>".
func keyOf(partition, messageKey string) Key {
	return Key{Handler: strings.TrimSuffix(partition, "#"+messageKey), MessageKey: messageKey}
}

// settledErr is the error a write that must not overwrite old returns.
func settledErr(old Record) error { return old.Conflict() }
