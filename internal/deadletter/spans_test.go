package deadletter_test

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/testkit"
)

const (
	letterTrace  = "5759e988bd862e3fe1be46a994272793"
	letterSpan   = "53995c3f42cd8ad8"
	letterHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=" + letterSpan + ";Sampled=1"
)

// With a tracer provider the dlq function makes a CONSUMER span "dlq
// process" per letter: it continues the job's trace the letter carries
// (its AWSTraceHeader; for a scheduled job's letter from EventBridge
// Scheduler, which sets none, its envelope's traceparent) and links to
// it, names the job, the DLQ and the message, says the letter's status
// and class, and the letter's lines carry its span id. A letter that is
// retried ends its span with an Error status; a body that names no job
// gets a span without job attributes.
func TestConsumerMakesASpanPerLetter(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	h := newHarness(t, func(c *deadletter.Config) {
		c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	})
	env := envelope(contract.Welcome.Name)
	moved := moved(t, env, 6)
	moved.EventSourceARN = "arn:aws:sqs:eu-west-1:123456789012:runstwice-dev-dlq"
	moved.Attributes["AWSTraceHeader"] = letterHeader
	scheduled := testkit.Envelope(contract.Welcome.Name, map[string]string{"userId": "u-2"})
	scheduled.RunAt, scheduled.Traceparent = time.Now().Add(time.Hour).UTC(), "00-"+letterTrace+"-"+letterSpan+"-01"
	fromScheduler := testkit.Record(t, scheduled, 1)
	if failed := h.run(t, moved, fromScheduler, testkit.RawRecord("not a job", 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans for three letters", len(spans))
	}
	for i, s := range spans[:2] {
		if s.Name() != deadletter.SpanName || s.SpanKind() != trace.SpanKindConsumer || s.SpanContext().TraceID().String() != letterTrace ||
			s.Parent().SpanID().String() != letterSpan || len(s.Links()) != 1 {
			t.Errorf("letter %d: span %q %v trace %s parent %s links %v; want it in the job's trace", i, s.Name(), s.SpanKind(),
				s.SpanContext().TraceID(), s.Parent().SpanID(), s.Links())
		}
	}
	a := spanAttrs(spans[0])
	if a[engine.AttrJobID] != env.MessageID || a[engine.AttrJobType] != env.Type || a["messaging.destination.name"] != "runstwice-dev-dlq" ||
		a["messaging.system"] != "aws_sqs" || a["runstwice.deadletter.status"] != "dead" || a["runstwice.deadletter.class"] != deadletter.ClassMaxReceives {
		t.Errorf("attributes %v", a)
	}
	if a := spanAttrs(spans[1]); a[engine.AttrJobID] != scheduled.MessageID || a[engine.AttrJobType] != contract.Welcome.Name {
		t.Errorf("the scheduled job's letter: %v", a)
	}
	if a := spanAttrs(spans[2]); a[engine.AttrJobID] != "" || spans[2].Parent().IsValid() {
		t.Errorf("a body that names no job: %v, parent %v", a, spans[2].Parent())
	}
	for _, l := range obstest.Lines(h.logs.String()) {
		if l[obs.KeyJobID] == env.MessageID && l[obs.KeySpanID] != spans[0].SpanContext().SpanID().String() {
			t.Errorf("line %v does not name its letter's span", l)
		}
	}

	h.records.err = errors.New("throttled")
	if failed := h.run(t, testkit.Record(t, envelope(contract.Welcome.Name), 6)); len(failed) != 1 {
		t.Fatalf("failures %v; want the letter retried", failed)
	}
	if last := rec.Ended()[len(rec.Ended())-1]; last.Status().Code != codes.Error {
		t.Errorf("a retried letter's span says %v", last.Status())
	}
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}
