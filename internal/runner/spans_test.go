package runner_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// tracedRunner is a runner of invoice with h, whose spans rec records.
func tracedRunner(t *testing.T, h runner.Handler) (*runner.Runner, *tracetest.SpanRecorder) {
	r, rec, _ := tracedRunnerLogs(t, h)
	return r, rec
}

// tracedRunnerLogs is tracedRunner, with the runner's log lines.
func tracedRunnerLogs(t *testing.T, h runner.Handler) (*runner.Runner, *tracetest.SpanRecorder, *bytes.Buffer) {
	t.Helper()
	rec, logs := tracetest.NewSpanRecorder(), &bytes.Buffer{}
	reg, err := message.NewRegistry(invoice)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: map[string]runner.Handler{invoice.Name: h},
		Switch: switches(nil), Markers: memstore.New(), Parker: queues{}, DeadLetterer: queues{},
		Logger: engine.NewLogger(logs, "info"), TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, rec, logs
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.Emit()
	}
	return out
}

// With a tracer provider, each record runs in a CONSUMER span "<queue>
// process" that continues the sender's trace (the record's AWSTraceHeader)
// and links to the sender's span, with the messaging attributes, the job's
// id and type and its outcome; the handler runs inside it.
func TestRunnerMakesAConsumerSpanPerRecord(t *testing.T) {
	var inHandler trace.SpanContext
	r, rec, logs := tracedRunnerLogs(t, runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error {
		inHandler = trace.SpanContextFromContext(ctx)
		return nil
	}))
	traced := record("inv-1")
	traced.Attributes["AWSTraceHeader"] = guideHeader
	untraced := record("inv-2")
	if _, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{traced}}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans for one record; want 1", len(spans))
	}
	s := spans[0]
	env, _ := message.Decode([]byte(traced.Body))
	a := attrs(s)
	switch {
	case s.Name() != "default process" || s.SpanKind() != trace.SpanKindConsumer:
		t.Errorf("span %q kind %v; want \"default process\", consumer", s.Name(), s.SpanKind())
	case s.SpanContext().TraceID().String() != guideTrace || s.Parent().SpanID().String() != guideSpan:
		t.Errorf("trace %s parent %s; want the sender's %s/%s", s.SpanContext().TraceID(), s.Parent().SpanID(), guideTrace, guideSpan)
	case len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID().String() != guideSpan:
		t.Errorf("links %v; want one to the sender's span", s.Links())
	case a["messaging.system"] != "aws_sqs" || a["messaging.destination.name"] != "default" || a["messaging.message.id"] != "sqs-inv-1" ||
		a[engine.AttrJobID] != env.MessageID || a[engine.AttrJobType] != invoice.Name || a[engine.AttrJobOutcome] != "succeeded":
		t.Errorf("attributes %v", a)
	case inHandler.SpanID() != s.SpanContext().SpanID():
		t.Errorf("the handler ran in span %s; want the record's %s", inHandler.SpanID(), s.SpanContext().SpanID())
	case s.Status().Code == codes.Error:
		t.Errorf("a success ends with status %v", s.Status())
	}
	if !strings.Contains(logs.String(), `"spanId":"`+s.SpanContext().SpanID().String()+`"`) {
		t.Errorf("the record's log lines do not name its span:\n%s", logs)
	}

	// No trace header: a trace of its own, no link.
	if _, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{untraced}}); err != nil {
		t.Fatal(err)
	}
	if s := rec.Ended()[1]; s.Parent().IsValid() || len(s.Links()) != 0 || s.SpanContext().TraceID().String() == guideTrace {
		t.Errorf("a record without a header: parent %v links %v", s.Parent(), s.Links())
	}
}

// A record that is retried ends its span with an Error status and the
// error; a duplicate (already processed) is an ordinary span.
func TestRunnerSpanSaysAFailure(t *testing.T) {
	fail := true
	r, rec := tracedRunner(t, runner.HandlerFunc(func(context.Context, runner.Job) error {
		if fail {
			return errors.New("provider down")
		}
		return nil
	}))
	msg := record("inv-3")
	for _, f := range []bool{true, false, false} {
		fail = f
		if _, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			t.Fatal(err)
		}
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans; want 3", len(spans))
	}
	for i, want := range []struct {
		outcome string
		code    codes.Code
	}{{"retry", codes.Error}, {"succeeded", codes.Unset}, {"duplicate", codes.Unset}} {
		s := spans[i]
		if a := attrs(s); a[engine.AttrJobOutcome] != want.outcome || s.Status().Code != want.code {
			t.Errorf("delivery %d: outcome %q status %v; want %q %v", i+1, a[engine.AttrJobOutcome], s.Status(), want.outcome, want.code)
		}
	}
	if len(spans[0].Events()) == 0 {
		t.Error("the failure's error is not recorded on its span")
	}
}

// seenSampler samples every span and keeps the attributes each started
// with.
type seenSampler struct{ started []map[attribute.Key]string }

func (s *seenSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	a := map[attribute.Key]string{}
	for _, kv := range p.Attributes {
		a[kv.Key] = kv.Value.Emit()
	}
	s.started = append(s.started, a)
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *seenSampler) Description() string { return "seen" }

// A sampler sees a record span's messaging attributes (the ones the
// messaging conventions call sampling relevant) when the span starts; the
// record's own end it, with its outcome.
func TestRunnerSpanStartsWithWhatASamplerReads(t *testing.T) {
	reg, err := message.NewRegistry(invoice)
	if err != nil {
		t.Fatal(err)
	}
	sampler, rec := &seenSampler{}, tracetest.NewSpanRecorder()
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: map[string]runner.Handler{invoice.Name: runner.HandlerFunc(func(context.Context, runner.Job) error { return nil })},
		Switch: switches(nil), Markers: memstore.New(), Parker: queues{}, DeadLetterer: queues{},
		Logger:         engine.NewLogger(&bytes.Buffer{}, "error"),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-9")}}); err != nil {
		t.Fatal(err)
	}
	if len(sampler.started) != 1 || len(rec.Ended()) != 1 {
		t.Fatalf("%d spans sampled, %d ended; want one record span", len(sampler.started), len(rec.Ended()))
	}
	if a := sampler.started[0]; a["messaging.system"] != "aws_sqs" || a["messaging.operation.type"] != "process" || a["messaging.destination.name"] != "default" {
		t.Errorf("the sampler saw %v; want the messaging system, operation and queue", a)
	}
	if a := attrs(rec.Ended()[0]); a["messaging.message.id"] != "sqs-inv-9" || a[engine.AttrJobType] != invoice.Name || a[engine.AttrJobOutcome] != "succeeded" || a["messaging.destination.name"] != "default" {
		t.Errorf("the span ended with %v", a)
	}
}
