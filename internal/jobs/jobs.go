// Package jobs is the job record and the enqueue-level dedup of runstwice:
// one job per (caller, type, natural key) while it is active, and a
// DuplicatePolicy that decides what happens after it reached a terminal
// state. See docs/storage.md and docs/api.md.
//
// The jobs table holds two kinds of item, both keyed by the string `pk`:
//
//   - `job#<id>`: the job record (type, key, caller, stored state,
//     timestamps, attempts, last error class, last outcome and its reason,
//     trace id, and the encoded message, so a job whose send was not
//     confirmed can be sent again under the same id);
//   - `dedup#<caller>#<type>#<key>`: the dedup pointer to the active or last
//     job with that natural key.
//
// State is derived, not copied: the record is written at enqueue, when a job
// is parked, when it fails, when it is cancelled or redriven, and when a
// handler reports that no work was needed; everything else comes from the
// job's effect marker (engine.Key{Type: type, JobID: jobId}). The
// whole lifecycle is one state machine: Transition (what a write may do to a
// stored state) and Derive (what a caller sees).
package jobs

import (
	"errors"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

// Allows reports whether policy p lets a new job be created when the key's last job
// is in state prev. It is false for every active state.
func Allows(p contract.DuplicatePolicy, prev State) bool {
	if !prev.Terminal() {
		return false
	}
	switch p {
	case contract.RejectAlways:
		return false
	case contract.RejectIfFailed:
		return prev != StateFailed
	}
	return true
}

// OutcomeRecord is one earlier outcome of a job: when it was recorded,
// what it was and why.
type OutcomeRecord struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason,omitempty"`
}

// MaxHistory is how many earlier outcomes a job's view keeps.
const MaxHistory = 20

// Retention periods (package lifetime derives every guard's life from
// them).
const (
	// QueueRetention is the work queues' message retention (template.yaml,
	// MessageRetentionPeriod; a template test keeps them equal): a job
	// neither processed nor failed this long after its run time can no
	// longer have a message in its queue and is Expired — unless it is
	// parked, whose message is sent again at every park.
	QueueRetention = lifetime.QueueRetention
	// TerminalRetention is how long a record is kept after it became
	// terminal, at least (never before its job's last delivery).
	TerminalRetention = lifetime.TerminalRecord
	// DefaultPendingTimeout is how long a Pending job belongs to the request
	// that reserved it (the enqueue function's timeout); after it any request
	// for the same key may complete it.
	DefaultPendingTimeout = 30 * time.Second
)

// Job is a job record with its derived state, as GET /v1/jobs/{jobId} shows
// it to its caller.
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
	// TraceID is the X-Ray trace id of the enqueue request, when traced.
	TraceID string `json:"traceId,omitempty"`
	// Attempts is the number of deliveries recorded when the job failed (the
	// SQS receive count); at least 1 once a worker touched the job.
	Attempts int `json:"attempts"`
	// LastErrorClass names the class of the error that failed the job (and
	// the provider's error code), never its message.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// LastOutcome is the last outcome a worker recorded: parked, noop,
	// dead-lettered, cancelled, redriven, skipped.
	LastOutcome string `json:"lastOutcome,omitempty"`
	// LastReason says why, e.g. "no mail needed: user not found".
	LastReason string `json:"lastReason,omitempty"`
	// History holds the outcomes before LastOutcome, oldest first, at most
	// MaxHistory.
	History []OutcomeRecord `json:"history,omitempty"`
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
	// After is the id of the job this one waits for (it is a
	// continuation), "" for none; AfterPolicy says which of its ends run
	// this job.
	After       string               `json:"after,omitempty"`
	AfterPolicy contract.AfterPolicy `json:"afterPolicy,omitempty"`
	// Continuations are the ids of the jobs that wait for this one (or
	// waited, and were released or cancelled when it ended), sorted. Only
	// an operator's view reads them (Store.Continuations).
	Continuations []string `json:"continuations,omitempty"`
	// ReleasedAt is when a continuation's parent ended and released it: its
	// delay counts from then, not from CreatedAt. Never shown.
	ReleasedAt time.Time `json:"-"`
	// sendFailed: a released continuation's last send failed, and no
	// release is sending it: the next one sends it at once.
	sendFailed bool
	// LetterDropped reports that a Failed job's dead letter was dropped by
	// an operator, so it cannot be redriven: what waits for it is decided
	// (Judge). Never shown.
	LetterDropped bool `json:"-"`
	// Fingerprint is the fingerprint of the request that created the job
	// (idempotency.Fingerprint), so a request that reuses the job's
	// Idempotency-Key for another request is told apart after its stored
	// answer is gone. Never shown.
	Fingerprint string `json:"-"`

	stored State
	// recorded are the outcomes the record holds (its history attribute),
	// oldest first; View makes History of them.
	recorded []OutcomeRecord
	// beforeParent: a continuation reserved before its parent exists (an
	// outbox child, see parentMayFollow), listed as unchecked.
	beforeParent bool
}

// Stored is the state the record holds, before derivation.
func (j Job) Stored() State { return j.stored }

// Delay is how long after creation (for a continuation, after its release)
// the message becomes visible.
func (j Job) Delay() time.Duration {
	from := j.CreatedAt
	if !j.ReleasedAt.IsZero() {
		from = j.ReleasedAt
	}
	return max(j.RunAt.Sub(from), 0)
}

// MaxQueueDelay is the longest SQS can hide a message (DelaySeconds 900):
// a job due later waits in a one-time schedule of EventBridge Scheduler
// instead (internal/schedule), named by its id.
const MaxQueueDelay = 900 * time.Second

// MayHaveSchedule reports whether the job was due further ahead than SQS
// can delay a message when it was created, so its message may wait in a
// one-time schedule.
func (j Job) MayHaveSchedule() bool { return j.Delay() > MaxQueueDelay }

// GoneAt is when the job's message can no longer be waiting in its queue,
// so that a job neither run nor failed by then is Expired: QueueRetention
// after its run time, and for a job that may wait in a one-time schedule
// also the scheduler's retry window (its schedule can deliver it up to that
// late).
func (j Job) GoneAt() time.Time {
	if j.MayHaveSchedule() {
		return j.RunAt.Add(lifetime.SchedulerRetryWindow + QueueRetention)
	}
	return j.RunAt.Add(QueueRetention)
}

// QueuedState is the state the record takes once its message was accepted
// (by SQS, or by the scheduler for a job due later than MaxQueueDelay):
// Scheduled when it has a delay, else Enqueued.
func (j Job) QueuedState() State {
	if j.Delay() > 0 {
		return StateScheduled
	}
	return StateEnqueued
}

// Due is the run time the job's guards must outlive: the later of its
// record's run time and the run time its message carries (a job run now
// keeps the time its one-time schedule was for, so the guards outlive a
// firing of a schedule whose delete failed).
func (j Job) Due() time.Time {
	due := j.RunAt
	if j.Message == "" {
		return due
	}
	if env, err := message.Decode([]byte(j.Message)); err == nil && env.RunAt.After(due) {
		return env.RunAt
	}
	return due
}

// MarkerKey is the key of the job's effect marker.
func (j Job) MarkerKey() engine.Key { return engine.Key{Type: j.Type, JobID: j.ID} }

// ErrNotFound is returned (wrapped) when a job does not exist or its record
// has expired (or, to a caller, when it is another caller's job).
var ErrNotFound = errors.New("jobs: job not found")

// ErrConflict is returned (wrapped, with the job) when a job is in a state
// the operation cannot leave: cancelling a job that already ran.
var ErrConflict = errors.New("jobs: job is in a state that does not allow this")

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
