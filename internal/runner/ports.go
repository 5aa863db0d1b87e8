package runner

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/marker"
)

// Handler runs one job type's work: load what the effect needs, then the
// effect. Work that turns out unnecessary (user deleted, address already
// confirmed) returns nil: a successful no-op whose marker is still claimed.
// Return Permanent(err) for a failure no retry can fix.
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
	Release(ctx context.Context, k marker.Key, owner string) error
}

// Parker re-sends a disabled job to its queue after delay, under the same
// messageId, so it neither runs nor burns its receive count.
type Parker interface {
	Park(ctx context.Context, queue contract.Queue, env contract.Envelope, body string, delay time.Duration) error
}

// DeadLetterer sends a message that can never succeed straight to the
// dead-letter queue with the reason attached.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, msg events.SQSMessage, reason string) error
}

// FailureRecorder marks a job Failed on its final attempt, before the error is
// returned and the queue's redrive moves the message to the DLQ.
type FailureRecorder interface {
	MarkFailed(ctx context.Context, jobID, errorClass string) error
}
