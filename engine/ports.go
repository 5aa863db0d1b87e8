package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Job is what a Handler gets: the validated envelope and its type.
type Job struct {
	Envelope Envelope
	Type     JobType
	// Attempt is the SQS receive count of this delivery (1 for the first).
	Attempt int
	// Logger carries jobId, type, key, correlationId, traceId and the
	// request id.
	Logger *slog.Logger
}

// Handler runs one job type's work: load what the effect needs, then the
// effect. It may run concurrently with other records of the batch. Work that
// turns out unnecessary (user deleted, address already confirmed) returns
// NoOp(reason): a success whose marker is still claimed. Return
// Permanent(err) for a failure no retry can fix; any other error is retried.
type Handler interface {
	Handle(ctx context.Context, job Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job Job) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, job Job) error { return f(ctx, job) }

// Switch is the kill switch: whether a job type may run now. def is the
// type's EnabledByDefault, the answer when the switch cannot be read (a
// type that is off by default is fail-closed). Package ssmswitch reads it
// from SSM Parameter Store.
type Switch interface {
	IsJobEnabled(ctx context.Context, jobType string, def bool) bool
}

// Parker re-sends a disabled job to its queue after delay, under the same
// messageId, so it neither runs nor burns its receive count (package
// sqsqueue).
type Parker interface {
	Park(ctx context.Context, queue Queue, env Envelope, body string, delay time.Duration) error
}

// DeadLetterer sends a message that can never succeed straight to the
// dead-letter queue with the reason attached (package sqsqueue).
type DeadLetterer interface {
	DeadLetter(ctx context.Context, msg events.SQSMessage, reason string) error
}

// The outcomes a JobRecorder writes with RecordOutcome.
const (
	OutcomeNoop    = "noop"
	OutcomeSkipped = "skipped"
)

// Failure is what a job's record says about its final failure.
type Failure struct {
	// Class names the kind of error (and its provider error code); never a
	// provider's message.
	Class string
	// Reason is the dead letter's reason, free of personal data.
	Reason string
	// Attempts is the number of deliveries (the SQS receive count).
	Attempts int
	// Due is the job's run time (Envelope.RunAt; zero for none): a
	// recorder keeps the record at least until every copy of the job that
	// can still be delivered is past.
	Due time.Time
}

// JobRecorder writes what the runner learns onto a job's record, when the
// application keeps one: parked, failed on its final attempt, done without
// work (OutcomeNoop, OutcomeSkipped), done with its claim failed. A job
// without a record is not an error: the recorder returns nil.
type JobRecorder interface {
	// MarkParked records that the job is parked; cancelled reports that it
	// was cancelled meanwhile (it is then skipped, not parked). A record
	// whose state does not allow a park is not an error.
	MarkParked(ctx context.Context, jobID string) (cancelled bool, err error)
	MarkFailed(ctx context.Context, jobID string, f Failure) error
	RecordOutcome(ctx context.Context, jobID, outcome, reason string) error
	MarkUnclaimed(ctx context.Context, jobID, reason string) error
}

// TickJob is the job a recurring schedule's tick becomes (see Tick).
type TickJob struct {
	ID, Caller, Type, Key, Queue string
	CorrelationID, TraceID       string
	// Message is the envelope derived from the tick, encoded.
	Message string
	At      time.Time
}

// TickDecision is what RecordTick found.
type TickDecision struct {
	// Busy: another tick is creating the job of this key right now.
	Busy bool
	// Own: the record is this tick's own job; when false, HolderID names
	// the job of another scheduled time that holds the key.
	Own      bool
	HolderID string
	// Recorded: the record was written now (not found already there).
	Recorded bool
}

// TickJobs writes the job record of a tick the first time a worker sees
// it, as an enqueue does for a request.
type TickJobs interface {
	RecordTick(ctx context.Context, job TickJob) (TickDecision, error)
}
