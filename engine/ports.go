package engine

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Switch is the kill switch: whether a kind may run now. def is the
// answer when the switch has no value for name or cannot be read:
// !Kind.FailClosed. Package ssmswitch reads it from SSM Parameter Store.
type Switch interface {
	IsJobEnabled(ctx context.Context, name string, def bool) bool
}

// Parker re-sends a received record, its body and message attributes
// unchanged, to the queue it came from (msg.EventSourceARN) after delay: a
// record whose switch is off (or that snoozed) neither runs nor spends its
// receive count. Package sqsqueue parks on SQS.
type Parker interface {
	Park(ctx context.Context, msg events.SQSMessage, delay time.Duration) error
}

// DeadLetterer sends a record that can never succeed, its body and message
// attributes unchanged, straight to the dead-letter queue with the reason
// attached (package sqsqueue).
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
	// Due is the job's run time (Kind.Due; zero for none): a recorder
	// keeps the record at least until every copy of the job that can still
	// be delivered is past.
	Due time.Time
}

// JobRecorder writes what the runner learns onto an application's own
// record of a job, found by the job's key: parked, failed on its final
// attempt, done without work (OutcomeNoop, OutcomeSkipped), done with its
// claim failed. A job without a record is not an error: the recorder
// returns nil.
type JobRecorder interface {
	// MarkParked records that the job is parked; cancelled reports that it
	// was cancelled meanwhile (it is then skipped, not parked). A record
	// whose state does not allow a park is not an error.
	MarkParked(ctx context.Context, key string) (cancelled bool, err error)
	MarkFailed(ctx context.Context, key string, f Failure) error
	RecordOutcome(ctx context.Context, key, outcome, reason string) error
	MarkUnclaimed(ctx context.Context, key, reason string) error
}
