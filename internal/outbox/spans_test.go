package outbox_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/message"
)

// itemTraceparent is the producer's span an item carries.
const (
	itemTrace       = "5759e988bd862e3fe1be46a994272793"
	itemSpan        = "53995c3f42cd8ad8"
	itemTraceparent = "00-" + itemTrace + "-" + itemSpan + "-01"
)

// spanAPI is fakeAPI recording the span context each enqueue ran under.
type spanAPI struct {
	fakeAPI
	under []trace.SpanContext
}

func (f *spanAPI) EnqueueFor(ctx context.Context, r enqueue.Request) enqueue.Answer {
	f.under = append(f.under, trace.SpanContextFromContext(ctx))
	return f.fakeAPI.EnqueueFor(ctx, r)
}

// With a tracer provider the relay makes a CONSUMER span "outbox process"
// per stream record: it continues the item's traceparent (the producer's
// span around its transaction) and links to it, names the job (id and
// type), the stream event and the table, and the enqueue runs inside it.
// An item without a traceparent starts a trace of its own; a dead-lettered
// item and a retried one end theirs with an Error status; a REMOVE makes
// none.
func TestRelayMakesASpanPerRecord(t *testing.T) {
	h := newHarness()
	api := &spanAPI{}
	rec := tracetest.NewSpanRecorder()
	h.relay.Enqueuer, h.relay.TracerProvider = api, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	traced := image("shop", "signup-1", "u-1")
	traced["traceparent"] = s(itemTraceparent)
	r := record("INSERT", traced)
	r.EventSourceArn = "arn:aws:dynamodb:eu-west-1:123456789012:table/runstwice-dev-outbox/stream/2026-11-30T08:00:00.000"
	bad := image("shop", "signup-2", "u-2") // the API refuses it: a dead letter
	api.answerOf = func(r enqueue.Request) enqueue.Answer {
		if r.IdempotencyKey == "signup-2" {
			return enqueue.Answer{Status: http.StatusBadRequest, Problem: enqueue.ProblemValidation}
		}
		return enqueue.Answer{Status: http.StatusAccepted, JobID: message.DeriveMessageID(r.Caller, r.IdempotencyKey)}
	}
	if failed := h.handle(t, r, record("INSERT", image("shop", "signup-3", "u-3")), record("INSERT", bad), record("REMOVE", image("shop", "x", "u-9"))); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans for three items and a REMOVE; want 3", len(spans))
	}
	s0 := spans[0]
	a := attrs(s0)
	jobID := message.DeriveMessageID("outbox:shop", "signup-1")
	switch {
	case s0.Name() != outbox.SpanName || s0.SpanKind() != trace.SpanKindConsumer:
		t.Errorf("span %q %v; want %q, consumer", s0.Name(), s0.SpanKind(), outbox.SpanName)
	case s0.SpanContext().TraceID().String() != itemTrace || s0.Parent().SpanID().String() != itemSpan:
		t.Errorf("trace %s parent %s; want the item's %s", s0.SpanContext().TraceID(), s0.Parent().SpanID(), itemTraceparent)
	case len(s0.Links()) != 1 || s0.Links()[0].SpanContext.SpanID().String() != itemSpan:
		t.Errorf("links %v; want one to the producer's span", s0.Links())
	case a[engine.AttrJobID] != jobID || a[engine.AttrJobType] != "email.welcome.v1" || a["messaging.message.id"] != r.EventID ||
		a["messaging.destination.name"] != "runstwice-dev-outbox" || a["messaging.operation.type"] != "process":
		t.Errorf("attributes %v", a)
	case len(api.under) != 3 || api.under[0].SpanID() != s0.SpanContext().SpanID():
		t.Errorf("the enqueue ran under %v; want the record's span %s", api.under, s0.SpanContext().SpanID())
	case s0.Status().Code == codes.Error:
		t.Errorf("a relayed item's span says %v", s0.Status())
	}
	if s1 := spans[1]; s1.Parent().IsValid() || len(s1.Links()) != 0 || s1.SpanContext().TraceID().String() == itemTrace {
		t.Errorf("an item without a traceparent: parent %v links %v", s1.Parent(), s1.Links())
	}
	if s2 := spans[2]; s2.Status().Code != codes.Error || attrs(s2)[engine.AttrJobID] != message.DeriveMessageID("outbox:shop", "signup-2") {
		t.Errorf("the dead-lettered item's span: %v %v", s2.Status(), attrs(s2))
	}

	api.answerOf = func(enqueue.Request) enqueue.Answer { return enqueue.Answer{Status: http.StatusServiceUnavailable} }
	if failed := h.handle(t, record("INSERT", image("shop", "signup-4", "u-4"))); len(failed) != 1 {
		t.Fatalf("failures %v; want the record retried", failed)
	}
	if last := rec.Ended()[len(rec.Ended())-1]; last.Status().Code != codes.Error || len(last.Events()) == 0 {
		t.Errorf("a retried record's span: %v, events %v", last.Status(), last.Events())
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}
