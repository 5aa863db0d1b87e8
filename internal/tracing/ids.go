package tracing

import (
	"context"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// traceIDKey keys the trace id a root span started under a context must
// take (WithTraceID).
type traceIDKey struct{}

// WithTraceID returns ctx under which a span started without a parent takes
// trace id id, with a span id of its own, when its provider generates ids
// with IDs (every function's does). It is how a request whose X-Ray header
// names a trace but no span (Root=… with no Parent: the trace was started
// by a caller that made no segment) stays in that trace: a remote parent
// would need a span id the caller never had.
func WithTraceID(ctx context.Context, id trace.TraceID) context.Context {
	if !id.IsValid() {
		return ctx
	}
	return context.WithValue(ctx, traceIDKey{}, id)
}

// IDs is the functions' span id generator: random ids, as the SDK's own,
// except that a root span started under WithTraceID takes that trace id.
type IDs struct{}

var _ sdktrace.IDGenerator = IDs{}

// NewIDs returns the trace id of ctx's WithTraceID, or a random one, and a
// random span id.
func (IDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	id, ok := ctx.Value(traceIDKey{}).(trace.TraceID)
	for !ok || !id.IsValid() {
		id, ok = randomTraceID(), true
	}
	return id, randomSpanID()
}

// NewSpanID returns a random span id.
func (IDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomTraceID() trace.TraceID {
	var id trace.TraceID
	for i := range id {
		id[i] = byte(rand.Uint32())
	}
	return id
}

func randomSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		for i := range id {
			id[i] = byte(rand.Uint32())
		}
	}
	return id
}
