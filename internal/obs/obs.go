// Package obs is how runstwice is observed: JSON logs through log/slog and
// CloudWatch metrics as Embedded Metric Format (EMF) documents on stdout, so
// no CloudWatch API is ever called from a function.
//
// Every log line of a function carries `function` and `stage`; every job log
// line also carries jobId, type, key, correlationId and the Lambda request
// id. Metrics are counted during an invocation and flushed once at its end,
// one EMF document per job type, with the dimensions stage and type.
package obs

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/runstwice/runstwice/engine"
)

// Log attribute keys shared by every component.
const (
	KeyJobID = "jobId"
	// KeyMessageID repeats the job id under the envelope's own name for it,
	// messageId, on every line that names a job.
	KeyMessageID     = "messageId"
	KeyType          = "type"
	KeyKey           = "key"
	KeyCorrelationID = "correlationId"
	KeyRequestID     = "requestId"
	KeyTraceID       = "traceId"
	// KeySpanID is the OpenTelemetry span a traced line was logged in.
	KeySpanID   = "spanId"
	KeyFunction = "function"
	KeyStage    = "stage"
	// KeyOutcome and KeyReason are on the one line the runner writes when
	// an SQS record's outcome is decided (see the engine's outcome table).
	KeyOutcome = "outcome"
	KeyReason  = "reason"
	KeyError   = "error"
)

// NewLogger returns a JSON logger writing to w at the level named by level
// ("debug", "info", "warn", "error"; info when empty or unknown): the
// engine's (engine.NewLogger).
func NewLogger(w io.Writer, level string) *slog.Logger { return engine.NewLogger(w, level) }

// DefaultLogger is what functions use: NewLogger(os.Stdout, $LOG_LEVEL) with
// the function name ($AWS_LAMBDA_FUNCTION_NAME) and the stage ($STAGE) on
// every line.
func DefaultLogger() *slog.Logger {
	return NewLogger(os.Stdout, os.Getenv("LOG_LEVEL")).With(
		KeyFunction, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), KeyStage, os.Getenv("STAGE"))
}

// WithRequest returns l with the Lambda request id of ctx, when there is one.
func WithRequest(ctx context.Context, l *slog.Logger) *slog.Logger {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return l.With(KeyRequestID, lc.AwsRequestID)
	}
	return l
}
