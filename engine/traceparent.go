package engine

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceparentHeader is the W3C Trace Context header, and the name of the
// field that carries it where no header goes: the envelope of a job that
// waits in a one-time schedule (Envelope.Traceparent) and an outbox item.
const TraceparentHeader = "traceparent"

// FormatTraceparent writes sc as a W3C traceparent,
// 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>; "" for an invalid
// span context. Trace state (an X-Ray Lineage) is not carried.
func FormatTraceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// ParseTraceparent reads a W3C traceparent into a remote span context, by
// the rules of OpenTelemetry's TraceContext propagator; ok is false for ""
// or a malformed value, which is ignored, never an error.
func ParseTraceparent(v string) (trace.SpanContext, bool) {
	if v == "" || len(v) > maxXRayHeader {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{TraceparentHeader: v})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// JobTraceHeader is the trace a record of job env continues, as an X-Ray
// trace header: the record's AWSTraceHeader, else the traceparent its
// envelope carries (a job that waited in a one-time schedule: EventBridge
// Scheduler sends no trace header) in X-Ray form, else "". The runner's
// record span, its log lines, a parked copy and a dead letter keep it; a
// consumer of the dead-letter queue continues it the same way.
func JobTraceHeader(msg events.SQSMessage, env Envelope) string {
	if h := RecordTraceHeader(msg); h != "" {
		return h
	}
	if sc, ok := ParseTraceparent(env.Traceparent); ok {
		return FormatXRay(sc)
	}
	return ""
}
