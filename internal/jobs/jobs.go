// Package jobs is the job record and the enqueue-level dedup of runstwice:
// one job per (caller, type, natural key) while it is active, and a
// DuplicatePolicy that decides what happens after it reached a terminal
// state.
//
// The jobs table holds two kinds of item, both keyed by the string `pk`:
//
//   - `job#<id>`: the job record (type, key, caller, state, timestamps, last
//     error class, and the encoded message, so a job whose send was not
//     confirmed can be sent again under the same id);
//   - `dedup#<caller>#<type>#<key>`: the dedup pointer to the active or last
//     job with that natural key.
//
// State is derived, not copied (DESIGN §4). The record is written at enqueue
// (Pending, then Enqueued or Scheduled once SQS accepted the message) and when
// a job fails (Failed). Everything else comes from the effect marker of the
// job (marker.Key{Handler: type, MessageKey: jobId}): an unexpired lease means
// Processing, a claimed marker means Succeeded. See Derive for the full rule,
// Expired included.
package jobs

import (
	"errors"
	"time"

	"github.com/runstwice/runstwice/internal/marker"
)

// State is a job's state as a caller sees it.
type State string

// The job states.
const (
	// StatePending: the job is reserved under its key but SQS has not yet
	// confirmed its message (the enqueue is in flight, or crashed, or SQS
	// failed). A retry of the same request, or after PendingTimeout any
	// request for the same key, sends the message again under the same id.
	StatePending State = "Pending"
	// StateEnqueued: the message is in its queue.
	StateEnqueued State = "Enqueued"
	// StateScheduled: the message is in its queue with a delay that has not
	// yet passed.
	StateScheduled State = "Scheduled"
	// StateProcessing: a worker holds an unexpired lease on the job's marker.
	StateProcessing State = "Processing"
	// StateSucceeded: the job's marker is claimed: its effect is done.
	StateSucceeded State = "Succeeded"
	// StateFailed: the job went to the dead-letter queue (MarkFailed).
	StateFailed State = "Failed"
	// StateExpired: the job was neither processed nor failed within the
	// queue's retention (QueueRetention after its run time): its message can
	// no longer be in the queue.
	StateExpired State = "Expired"
)

// Active reports whether a job in state s still holds its key: Pending,
// Enqueued, Scheduled or Processing.
func (s State) Active() bool {
	switch s {
	case StatePending, StateEnqueued, StateScheduled, StateProcessing:
		return true
	}
	return false
}

// Terminal reports whether s is final: Succeeded, Failed or Expired.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateExpired:
		return true
	}
	return false
}

// DuplicatePolicy decides whether a new job may be created under a key whose
// last job is terminal. While that job is active no policy creates a second
// one.
type DuplicatePolicy string

// The duplicate policies.
const (
	// AllowAfterFailed (the default) allows a new job after any terminal
	// state.
	AllowAfterFailed DuplicatePolicy = "AllowAfterFailed"
	// RejectIfFailed rejects a new job after Failed, allows it after
	// Succeeded or Expired.
	RejectIfFailed DuplicatePolicy = "RejectIfFailed"
	// RejectAlways rejects a new job after any terminal state.
	RejectAlways DuplicatePolicy = "RejectAlways"
)

// Policies lists the duplicate policies.
var Policies = []DuplicatePolicy{AllowAfterFailed, RejectIfFailed, RejectAlways}

// ParsePolicy returns the policy named s; "" is AllowAfterFailed. ok is false
// for any other name.
func ParsePolicy(s string) (DuplicatePolicy, bool) {
	switch p := DuplicatePolicy(s); p {
	case "":
		return AllowAfterFailed, true
	case AllowAfterFailed, RejectIfFailed, RejectAlways:
		return p, true
	}
	return "", false
}

// Allows reports whether p lets a new job be created when the key's last job
// is in state prev. It is false for every active state.
func (p DuplicatePolicy) Allows(prev State) bool {
	if !prev.Terminal() {
		return false
	}
	switch p {
	case RejectAlways:
		return false
	case RejectIfFailed:
		return prev != StateFailed
	}
	return true
}

// Retention periods.
const (
	// QueueRetention is the work queues' message retention (the SQS maximum):
	// a job neither processed nor failed this long after its run time is
	// Expired.
	QueueRetention = 14 * 24 * time.Hour
	// TerminalRetention is how long a record is kept after it became
	// terminal (DESIGN §4: 14 days).
	TerminalRetention = 14 * 24 * time.Hour
	// DefaultPendingTimeout is how long a Pending job belongs to the request
	// that reserved it (the enqueue function's timeout); after it any request
	// for the same key may complete it.
	DefaultPendingTimeout = 30 * time.Second
)

// Job is a job record with its derived state.
type Job struct {
	// ID is the job id, which is the message id.
	ID string `json:"jobId"`
	// Caller is the principal that enqueued the job. Only it may read it.
	Caller string `json:"-"`
	// Type is the job type name.
	Type string `json:"type"`
	// Key is the natural idempotency key.
	Key string `json:"key"`
	// State is the derived state (see Derive).
	State State `json:"state"`
	// Queue is the work queue the message is sent to.
	Queue string `json:"queue"`
	// CorrelationID is the correlation id of the enqueue request.
	CorrelationID string `json:"correlationId"`
	// Attempts is the number of deliveries recorded (by MarkFailedAfter);
	// at least 1 once a worker touched the job.
	Attempts int `json:"attempts"`
	// LastErrorClass names the class of the error that failed the job.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// CreatedAt is when the job was reserved.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the record was last written.
	UpdatedAt time.Time `json:"updatedAt"`
	// RunAt is when the message becomes visible (CreatedAt plus the delay).
	RunAt time.Time `json:"runAt"`
	// FailedAt is when the job was marked Failed.
	FailedAt *time.Time `json:"failedAt,omitempty"`
	// Message is the encoded envelope, kept so an unconfirmed send can be
	// repeated under the same id. It carries args (IDs only) and is never
	// shown to callers.
	Message string `json:"-"`

	stored State
}

// Delay is how long after creation the message becomes visible.
func (j Job) Delay() time.Duration { return max(j.RunAt.Sub(j.CreatedAt), 0) }

// QueuedState is the state the record takes once SQS accepted the message:
// Scheduled when it has a delay, else Enqueued.
func (j Job) QueuedState() State {
	if j.Delay() > 0 {
		return StateScheduled
	}
	return StateEnqueued
}

// MarkerKey is the key of the job's effect marker.
func (j Job) MarkerKey() marker.Key { return marker.Key{Handler: j.Type, MessageKey: j.ID} }

// Derive returns the state of a job whose record says stored, whose message
// becomes visible at runAt, and whose marker m exists when hasMarker, at now:
//
//   - a claimed marker: Succeeded (the effect is done, whatever the record says);
//   - a record marked Failed: Failed;
//   - an unexpired lease: Processing;
//   - no marker (or an expired lease) and now ≥ runAt + QueueRetention: Expired;
//   - Scheduled whose runAt has passed: Enqueued;
//   - otherwise the record's state (Pending, Enqueued, Scheduled).
func Derive(stored State, runAt time.Time, m marker.Record, hasMarker bool, now time.Time) State {
	switch {
	case hasMarker && m.Processed():
		return StateSucceeded
	case stored == StateFailed:
		return StateFailed
	case hasMarker && m.LeaseActive(now):
		return StateProcessing
	case !now.Before(runAt.Add(QueueRetention)):
		return StateExpired
	case stored == StateScheduled && !now.Before(runAt):
		return StateEnqueued
	}
	return stored
}

// ErrNotFound is returned (wrapped) when a job does not exist or its record
// has expired.
var ErrNotFound = errors.New("jobs: job not found")

// Outcome is what Reserve decided.
type Outcome int

// The outcomes of Reserve.
const (
	// Reserved: a new Pending record and dedup pointer were written for the
	// job. Send its message, then promote it.
	Reserved Outcome = iota + 1
	// Resume: a Pending job exists whose message SQS has not confirmed (the
	// caller's own job after a crash or an SQS failure, or another request's
	// that has been pending longer than PendingTimeout). Send Decision.Job's
	// Message again under its id, then promote it.
	Resume
	// Duplicate: an active job holds the key (or the request's own job id
	// already exists). Decision.Job is it.
	Duplicate
	// Rejected: the key's last job is terminal and the policy rejects a new
	// one. Decision.Job is that job.
	Rejected
	// Busy: another request is creating a job under this key right now; retry
	// after Decision.RetryAfter.
	Busy
)

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o {
	case Reserved:
		return "reserved"
	case Resume:
		return "resume"
	case Duplicate:
		return "duplicate"
	case Rejected:
		return "rejected"
	case Busy:
		return "busy"
	}
	return "unknown"
}

// Decision is the result of Reserve.
type Decision struct {
	Outcome Outcome
	// Job is the job the outcome is about: the new one (Reserved), the
	// pending one (Resume), the existing one (Duplicate, Rejected).
	Job Job
	// Own reports that Job is the request's own job (same id).
	Own bool
	// RetryAfter is set for Busy.
	RetryAfter time.Duration
}
