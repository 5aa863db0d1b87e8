package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// The attribute keys of the engine's log lines.
const (
	keyType     = "type"
	keyKey      = "key"
	keyTraceID  = "traceId"
	keySpanID   = "spanId"
	keyOutcome  = "outcome"
	keyReason   = "reason"
	keyError    = "error"
	keyRequest  = "requestId"
	arnSegments = 6 // arn:aws:sqs:<region>:<account>:<queue>
)

// withRequest returns l with the Lambda request id of ctx, when there is
// one.
func withRequest(ctx context.Context, l *slog.Logger) *slog.Logger {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return l.With(keyRequest, lc.AwsRequestID)
	}
	return l
}

// queueOfARN is the queue's name in a record's EventSourceARN (its last
// part), or "sqs" when the record names none.
func queueOfARN(msg events.SQSMessage, _ string) string {
	parts := strings.SplitN(msg.EventSourceARN, ":", arnSegments)
	if len(parts) < arnSegments || parts[arnSegments-1] == "" {
		return "sqs"
	}
	return parts[arnSegments-1]
}

// providerError is an AWS service error (smithy-go's APIError has these
// methods), matched by its shape so the engine needs no AWS SDK.
type providerError interface {
	error
	ErrorCode() string
	ErrorMessage() string
}

// Redact returns err's text for logs, dead-letter reasons and job records,
// with every provider's own message replaced by the provider's error code.
// Providers quote addresses and other personal data in their messages
// (SES: "Email address is not verified. The following identities failed
// the check: bob@example.com"; SMTP: "550 <bob@example.com>: Recipient
// address rejected"), and none of that may leave the process. The caller's
// own wrapping text is kept.
func Redact(err error) string {
	if err == nil {
		return ""
	}
	full := err.Error()
	p, desc := provider(err)
	if p == nil {
		return full
	}
	inner := p.Error()
	if i := strings.LastIndex(full, inner); i >= 0 && i+len(inner) == len(full) {
		return full[:i] + desc
	}
	return desc
}

// Redacted is implemented by an error whose own text carries no provider
// message (built from the provider's code and our advice): Redact keeps
// it, and what it wraps, as it is.
type Redacted interface {
	Redacted() bool
}

// ErrorCode returns the provider's error code in err ("MessageRejected",
// "ThrottlingException", "smtp 550"), or "".
func ErrorCode(err error) string {
	var api providerError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return fmt.Sprintf("smtp %d", tp.Code)
	}
	return ""
}

// provider finds the outermost error in err's chain that carries a
// provider's message (an AWS service error, an SMTP reply), and names it
// without that message.
func provider(err error) (error, string) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if r, ok := e.(Redacted); ok && r.Redacted() {
			return nil, "" // its text is ours, built from codes
		}
		if api, ok := e.(providerError); ok {
			return e, api.ErrorCode()
		}
		if tp, ok := e.(*textproto.Error); ok {
			return e, fmt.Sprintf("smtp reply %d", tp.Code)
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				if p, d := provider(x); p != nil {
					return p, d
				}
			}
			return nil, ""
		}
	}
	return nil, ""
}

// traceRoot returns the trace id of an X-Ray trace header: its Root field
// ("1-5759e988-bd862e3fe1be46a994272793"), or "" when it has none. It is
// what log lines carry as traceId.
func traceRoot(header string) string {
	if id, ok := XRayRoot(header); ok {
		return XRayTraceID(id)
	}
	return ""
}
