package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// MaxVisibility is SQS's largest visibility timeout (12 hours).
const MaxVisibility = 12 * time.Hour

// MaxDelay is SQS's largest DelaySeconds (15 minutes): the longest a park
// can wait.
const MaxDelay = 900 * time.Second

// VisibilityChange postpones one received record: it stays hidden for
// Timeout from the call (rounded up to whole seconds, at most
// MaxVisibility).
type VisibilityChange struct {
	Message events.SQSMessage
	Timeout time.Duration
}

// VisibilitySeconds is d as an SQS visibility timeout: whole seconds,
// rounded up, between 0 and MaxVisibility.
func VisibilitySeconds(d time.Duration) int32 {
	d = min(max(d, 0), MaxVisibility)
	return int32((d + time.Second - 1) / time.Second)
}

// ReceiveCount is the SQS receive count of a delivery (1 for the first, and
// for a record that does not say).
func ReceiveCount(msg events.SQSMessage) int {
	n, err := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// RecordTraceHeader returns the X-Ray trace header an SQS record carries
// (the AWSTraceHeader system attribute), or "".
func RecordTraceHeader(msg events.SQSMessage) string {
	return msg.Attributes["AWSTraceHeader"]
}

// traceKey carries a trace header in a context (WithTraceHeader).
type traceKey struct{}

// WithTraceHeader returns ctx carrying the X-Ray trace header of the job
// being handled, so the messages sent for it (a park) keep the trace. The
// runner sets it before a record's handler runs.
func WithTraceHeader(ctx context.Context, header string) context.Context {
	if header == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, header)
}

// TraceHeader returns the trace header WithTraceHeader put in ctx, or "".
func TraceHeader(ctx context.Context) string {
	v, _ := ctx.Value(traceKey{}).(string)
	return v
}
