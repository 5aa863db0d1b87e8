package runner_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// The header of AWS's X-Ray developer guide ("Tracing header").
const (
	guideHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	guideTrace  = "5759e988bd862e3fe1be46a994272793"
	guideSpan   = "53995c3f42cd8ad8"
)

// guideTraceparent is guideHeader's span as a W3C traceparent, sampled.
const guideTraceparent = "00-" + guideTrace + "-" + guideSpan + "-01"

// A job that waited in a one-time schedule comes with no AWSTraceHeader
// (EventBridge Scheduler sets none) and its trace in its envelope: the
// record's span continues that traceparent and links to it, its log lines
// say that trace, and a parked copy carries it on as its trace header. A
// record's AWSTraceHeader, when it has one, comes first; a malformed
// traceparent is ignored.
func TestRunnerContinuesTheEnvelopesTraceparent(t *testing.T) {
	rec, logs, parker := tracetest.NewSpanRecorder(), &bytes.Buffer{}, &traceParker{}
	reg, err := message.NewRegistry(invoice)
	if err != nil {
		t.Fatal(err)
	}
	off := false
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: map[string]runner.Handler{invoice.Name: runner.HandlerFunc(func(context.Context, runner.Job) error { return nil })},
		Switch: switchFunc(func() bool { return !off }), Markers: memstore.New(), Parker: parker, DeadLetterer: queues{},
		Logger: engine.NewLogger(logs, "info"), TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
	})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := func(id, traceparent string) events.SQSMessage {
		env := testkit.EnvelopeFor(invoice)
		env.MessageID, env.RunAt, env.Traceparent = message.DeriveMessageID("t", id), env.EnqueuedAt.Add(time.Hour), traceparent
		body, err := env.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return events.SQSMessage{MessageId: "sqs-" + id, Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	}
	run := func(msg events.SQSMessage) sdktrace.ReadOnlySpan {
		t.Helper()
		n := len(rec.Ended())
		if _, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			t.Fatal(err)
		}
		if len(rec.Ended()) != n+1 {
			t.Fatalf("%d spans for one record", len(rec.Ended())-n)
		}
		return rec.Ended()[n]
	}

	s := run(scheduled("a", guideTraceparent))
	if s.SpanContext().TraceID().String() != guideTrace || s.Parent().SpanID().String() != guideSpan ||
		len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID().String() != guideSpan {
		t.Errorf("span trace %s parent %s links %v; want the envelope's %s", s.SpanContext().TraceID(), s.Parent().SpanID(), s.Links(), guideTraceparent)
	}
	if !strings.Contains(logs.String(), `"traceId":"1-5759e988-bd862e3fe1be46a994272793"`) {
		t.Errorf("the record's lines do not say the envelope's trace:\n%s", logs)
	}

	off = true
	run(scheduled("b", guideTraceparent))
	if len(parker.headers) != 1 || !strings.HasPrefix(parker.headers[0], "Root=1-5759e988-bd862e3fe1be46a994272793;Parent="+guideSpan) {
		t.Errorf("the parked copy's trace header %q; want the envelope's trace", parker.headers)
	}
	off = false

	const other = "Root=1-67891233-abcdef012345678912345678;Parent=463ac35c9f6413ad;Sampled=1"
	both := scheduled("c", guideTraceparent)
	both.Attributes["AWSTraceHeader"] = other
	if s := run(both); s.SpanContext().TraceID().String() != "67891233abcdef012345678912345678" {
		t.Errorf("with both, the span continued %s; want the AWSTraceHeader's", s.SpanContext().TraceID())
	}
	if s := run(scheduled("d", "00-nonsense")); s.Parent().IsValid() || len(s.Links()) != 0 {
		t.Errorf("a malformed traceparent was continued: parent %v", s.Parent())
	}
}

// switchFunc is a kill switch that asks on.
type switchFunc func() bool

func (f switchFunc) IsJobEnabled(context.Context, string, bool) bool { return f() }

// A recurring schedule's tick comes with no trace: its record's span
// starts the trace of the tick's job, and the job's record keeps it as its
// traceId (X-Ray form), as a request's job keeps its request's.
func TestATicksJobIsItsSpansTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	res := &testkit.Reserver{}
	h, _ := newHarness(t, func(c *runner.Config) {
		c.Ticks = jobs.TicksForEngine(res)
		c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	})
	h.Switches.Set(weekly.Name, true)
	body := tickBody(t, "2026-12-07T09:00:00Z")
	if failed := h.Run(t, testkit.RawRecord(body, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	id := mustDecodeJob(t, body).MessageID
	if got, want := res.Jobs()[id].TraceID, engine.XRayTraceID(spans[0].SpanContext().TraceID()); got == "" || got != want {
		t.Errorf("the tick's job has traceId %q; want its span's trace %q", got, want)
	}
}

// A record that came with no trace (a tick, a copy sent without a header)
// starts one in its span, and what its job sends (a fan-out's pages, a
// park) carries that span as its trace header, so those jobs join the
// trace.
func TestUntracedRecordsSendsCarryItsSpan(t *testing.T) {
	var header string
	r, rec := tracedRunner(t, runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error {
		header = engine.TraceHeader(ctx)
		return nil
	}))
	if _, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-untraced")}}); err != nil {
		t.Fatal(err)
	}
	if spans := rec.Ended(); len(spans) != 1 || header == "" || header != engine.FormatXRay(spans[0].SpanContext()) {
		t.Errorf("the job's sends carry %q; want its record span's trace", header)
	}
}

// traceParker records the trace header each park carries.
type traceParker struct{ headers []string }

func (p *traceParker) Park(ctx context.Context, _ events.SQSMessage, _ time.Duration) error {
	p.headers = append(p.headers, engine.TraceHeader(ctx))
	return nil
}
