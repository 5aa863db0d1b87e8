package engine

import (
	"context"

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
