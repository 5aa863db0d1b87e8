package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/internal/tracing"
)

// A root span started under WithTraceID is in that trace, with no parent;
// without it, and for the spans under it, ids are random as usual.
func TestRootSpanTakesTheContextsTraceID(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDs{}))
	id, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	tr := tp.Tracer("t")
	ctx, root := tr.Start(tracing.WithTraceID(context.Background(), id), "root")
	_, child := tr.Start(ctx, "child")
	child.End()
	root.End()
	_, other := tr.Start(context.Background(), "other")
	other.End()
	if got := root.SpanContext().TraceID(); got != id || trace.SpanContextFromContext(ctx).SpanID() == (trace.SpanID{}) {
		t.Errorf("root span trace %s; want %s", got, id)
	}
	if child.SpanContext().TraceID() != id || child.SpanContext().SpanID() == root.SpanContext().SpanID() {
		t.Errorf("child %v; want the root's trace and a span id of its own", child.SpanContext())
	}
	if other.SpanContext().TraceID() == id || !other.SpanContext().TraceID().IsValid() {
		t.Errorf("a span without WithTraceID took trace %s", other.SpanContext().TraceID())
	}
	for _, s := range rec.Ended() {
		if s.Name() == "root" && s.Parent().IsValid() {
			t.Errorf("root span has parent %v", s.Parent())
		}
	}
}
