package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// MaxVisibility is SQS's largest visibility timeout (12 hours).
const MaxVisibility = 12 * time.Hour

// MaxDelay is SQS's largest DelaySeconds (15 minutes): the longest a park
// can wait.
const MaxDelay = 900 * time.Second

// MaxBackoff is the longest a back-off hides a record: BackoffSchedule
// keeps its Cap at most this. SQS refuses a visibility change that would
// end more than MaxVisibility after the record was received (not after
// the change), and a record reaches its handler some time after it was
// received: the event source mapping's batching window (up to 5 minutes),
// then the batch's own run (up to Lambda's 15). An hour short of
// MaxVisibility leaves room for both; the runner also caps each change by
// the record's own receipt time when SQS tells it (visibilityLeft).
const MaxBackoff = MaxVisibility - time.Hour

// receiptSlack is how long before a batch reached the runner its records
// may have been received, for a record whose receipt time SQS does not
// give (a later receive: ApproximateFirstReceiveTimestamp is its first):
// the event source mapping's largest batching window (5 minutes), with
// room to spare.
const receiptSlack = 15 * time.Minute

// visibilityMargin is kept below SQS's limit for the clocks of SQS and the
// function, which differ a little, and the change call's own time.
const visibilityMargin = time.Minute

// visibilityLeft is the longest visibility timeout SQS accepts for msg at
// now: MaxVisibility counted from the record's receipt, less
// visibilityMargin. The receipt is ApproximateFirstReceiveTimestamp for a
// first receive; for a later one (whose time SQS does not say), the start
// of the batch less receiptSlack.
func visibilityLeft(msg events.SQSMessage, batchStart, now time.Time) time.Duration {
	received := batchStart.Add(-receiptSlack)
	if ReceiveCount(msg) == 1 {
		if ms, err := strconv.ParseInt(msg.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); err == nil && ms > 0 {
			received = time.UnixMilli(ms)
		}
	}
	return MaxVisibility - now.Sub(received) - visibilityMargin
}

// VisibilityError is what a Backoff returns when some of its changes were
// not made: Failed maps the message id of each record whose change failed
// to why (a provider's error code, never its message). The records it does
// not name were postponed. The runner keeps the back-off of those and lets
// the failed ones come back after the queue's visibility timeout.
type VisibilityError struct {
	Failed map[string]error
}

// Error names how many changes failed and each record with its reason, in
// message id order, each reason with a provider's message replaced by its
// code (Redact).
func (e *VisibilityError) Error() string {
	ids := make([]string, 0, len(e.Failed))
	for id := range e.Failed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + " (" + Redact(e.Failed[id]) + ")"
	}
	return fmt.Sprintf("%d visibility changes failed: %s", len(ids), strings.Join(parts, ", "))
}

// Redacted reports that Error carries no provider message.
func (e *VisibilityError) Redacted() bool { return true }

// Unwrap returns the failures, so errors.Is and errors.As see each.
func (e *VisibilityError) Unwrap() []error {
	out := make([]error, 0, len(e.Failed))
	for _, err := range e.Failed {
		out = append(out, err)
	}
	return out
}

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
	switch v := ctx.Value(traceKey{}).(type) {
	case string:
		return v
	case *string: // the runner's, in the record's item
		return *v
	}
	return ""
}
