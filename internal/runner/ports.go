package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// Job is what a Handler gets: the validated envelope and its type.
type Job struct {
	Envelope contract.Envelope
	Type     contract.JobType
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

// Toggles is the kill switch (internal/toggle.Source).
type Toggles interface {
	IsJobEnabled(ctx context.Context, jobType string, def bool) bool
}

// Markers is the effect marker store (internal/marker.Dynamo).
type Markers interface {
	PeekBatch(ctx context.Context, keys []marker.Key) (map[marker.Key]marker.Record, error)
	Lease(ctx context.Context, k marker.Key, owner string, until time.Time) (marker.Record, error)
	Claim(ctx context.Context, k marker.Key, owner string) (bool, error)
	Fail(ctx context.Context, k marker.Key, owner string) error
	Release(ctx context.Context, k marker.Key, owner string) error
}

// Parker re-sends a disabled job to its queue after delay, under the same
// messageId, so it neither runs nor burns its receive count
// (internal/queue.Sender).
type Parker interface {
	Park(ctx context.Context, queue contract.Queue, env contract.Envelope, body string, delay time.Duration) error
}

// DeadLetterer sends a message that can never succeed straight to the
// dead-letter queue with the reason attached (internal/queue.Sender).
type DeadLetterer interface {
	DeadLetter(ctx context.Context, msg events.SQSMessage, reason string) error
}

// JobRecorder writes what the runner learns onto the job record
// (internal/jobs.Recorder): parked, failed on its final attempt, done
// without work, done with its claim failed.
type JobRecorder interface {
	MarkParked(ctx context.Context, jobID string) (jobs.State, error)
	MarkFailed(ctx context.Context, jobID string, f jobs.Failure) error
	RecordOutcome(ctx context.Context, jobID, outcome, reason string) error
	MarkUnclaimed(ctx context.Context, jobID, reason string) error
}

// TickJobs writes the job record of a tick the first time a worker sees it
// (internal/jobs.Store): Reserve under the tick's derived id and key, then
// Promote, as the enqueue function does for a request.
type TickJobs interface {
	Reserve(ctx context.Context, job jobs.Job, policy jobs.DuplicatePolicy) (jobs.Decision, error)
	Promote(ctx context.Context, job jobs.Job) error
}
