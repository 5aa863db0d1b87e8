package enqueue_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/internal/tracing"
	"github.com/runstwice/runstwice/message"
)

// With a tracer provider, a POST is one SERVER span "POST
// /v1/jobs/{type}" with its PRODUCER span "send <queue>" inside; the
// message carries the producer span as its AWSTraceHeader (the worker's
// span continues it), the job's traceId is the spans' trace in X-Ray form,
// and a request that came with an X-Ray header continues that trace.
func TestTracedPostIsOneTraceFromRequestToSend(t *testing.T) {
	for _, tc := range []struct {
		name, header string
	}{
		{"a trace of its own", ""},
		{"the request's X-Ray trace", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"},
		{"the request's X-Ray root, no parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			rec := tracetest.NewSpanRecorder()
			h.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDs{}))
			var opts []reqOpt
			if tc.header != "" {
				opts = append(opts, withHeader("X-Amzn-Trace-Id", tc.header))
			}
			body, server, producer := tracedPost(t, h, rec, post("email.welcome.v1", "k-traced", `{"args":{"userId":"u-1"}}`, opts...))
			a := attrs(server)
			if server.Name() != "POST /v1/jobs/{type}" || a["http.request.method"] != "POST" || a["http.route"] != "/v1/jobs/{type}" ||
				a["http.response.status_code"] != "202" || a[engine.AttrJobID] != body.JobID || a[engine.AttrJobType] != "email.welcome.v1" {
				t.Errorf("server span %q %v", server.Name(), a)
			}
			if producer.Name() != "send default" || producer.Parent().SpanID() != server.SpanContext().SpanID() ||
				attrs(producer)[engine.AttrJobID] != body.JobID || attrs(producer)["messaging.destination.name"] != "default" {
				t.Errorf("producer span %q parent %s attrs %v", producer.Name(), producer.Parent().SpanID(), attrs(producer))
			}
			if len(w.beginJob) != 2 || w.beginJob[0].Value.AsString() != body.JobID {
				t.Errorf("the request layer's calls name the job %v; want %s (their CLIENT spans carry it)", w.beginJob, body.JobID)
			}
			sent := w.messages()
			if len(sent) != 1 || sent[0].TraceHeader != engine.FormatXRay(producer.SpanContext()) {
				t.Fatalf("the message's trace header %v; want the producer span's %q", sent, engine.FormatXRay(producer.SpanContext()))
			}
			job, err := w.Get(context.Background(), body.JobID)
			if err != nil || job.TraceID != engine.XRayTraceID(server.SpanContext().TraceID()) {
				t.Fatalf("job traceId %q; want the spans' %q", job.TraceID, engine.XRayTraceID(server.SpanContext().TraceID()))
			}
			wantParent := ""
			if strings.Contains(tc.header, "Parent=") {
				wantParent = "53995c3f42cd8ad8"
			}
			if tc.header != "" && (job.TraceID != "1-5759e988-bd862e3fe1be46a994272793" || parentOf(server) != wantParent) {
				t.Errorf("the request's trace was not continued: job %q, server parent %q; want %q", job.TraceID, parentOf(server), wantParent)
			}
		})
	}
}

// A job due later than SQS can hold it is handed to EventBridge Scheduler
// inside a PRODUCER span "create <queue>" under the request's, and its
// schedule's input (the envelope) carries that span as its traceparent,
// since the scheduler sends no trace header: the worker's span continues
// the job's trace when the schedule fires. The job's stored message (what
// a run-now sends) carries it too, and its traceId is the spans' trace.
func TestTracedScheduledJobCarriesItsTraceInItsEnvelope(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	rec := tracetest.NewSpanRecorder()
	h.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	body, server, producer := tracedPost(t, h, rec, post("email.welcome.v1", "k-later", runAtBody(`"2026-11-30T10:00:00Z"`)))
	a := attrs(producer)
	if producer.Name() != "create default" || producer.Parent().SpanID() != server.SpanContext().SpanID() ||
		a["messaging.operation.type"] != "create" || a[engine.AttrJobID] != body.JobID || a[engine.AttrJobType] != "email.welcome.v1" {
		t.Errorf("producer span %q parent %s attrs %v", producer.Name(), producer.Parent().SpanID(), a)
	}
	sched, ok := w.schedule(body.JobID)
	if !ok {
		t.Fatal("no schedule")
	}
	want := engine.FormatTraceparent(producer.SpanContext())
	env, err := message.Decode([]byte(sched.Body))
	if err != nil || env.Traceparent != want || env.RunAt.IsZero() {
		t.Fatalf("the schedule's input %s (%v); want traceparent %s", sched.Body, err, want)
	}
	job, err := w.Get(context.Background(), body.JobID)
	if err != nil || job.Message != sched.Body || job.TraceID != engine.XRayTraceID(server.SpanContext().TraceID()) {
		t.Errorf("job message %s traceId %q; want the schedule's input and the spans' trace", job.Message, job.TraceID)
	}

	// Untraced, the input is the envelope as it always was.
	w2 := newWorld()
	call(t, newHandler(w2), post("email.welcome.v1", "k-later", runAtBody(`"2026-11-30T10:00:00Z"`)))
	if sched, ok := w2.schedule(body.JobID); !ok || strings.Contains(sched.Body, "traceparent") {
		t.Errorf("untraced schedule input %s", sched.Body)
	}
}

// tracedPost sends req to h, which must accept it, and returns the answer
// and the two spans rec recorded: the request's SERVER span and its
// PRODUCER span.
func tracedPost(t *testing.T, h *enqueue.Handler, rec *tracetest.SpanRecorder, req events.APIGatewayV2HTTPRequest) (acceptedBody, sdktrace.ReadOnlySpan, sdktrace.ReadOnlySpan) {
	t.Helper()
	resp := call(t, h, req)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	var body acceptedBody
	_ = json.Unmarshal([]byte(resp.Body), &body)
	spans := byKind(rec)
	server, producer := spans[trace.SpanKindServer], spans[trace.SpanKindProducer]
	if server == nil || producer == nil || len(rec.Ended()) != 2 {
		t.Fatalf("spans %v; want a server and a producer span", rec.Ended())
	}
	return body, server, producer
}

// byKind is the spans rec recorded, by their kind (the last of each).
func byKind(rec *tracetest.SpanRecorder) map[trace.SpanKind]sdktrace.ReadOnlySpan {
	spans := map[trace.SpanKind]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.SpanKind()] = s
	}
	return spans
}

// parentOf is the span's parent span id, "" for a root span.
func parentOf(s sdktrace.ReadOnlySpan) string {
	if !s.Parent().SpanID().IsValid() {
		return ""
	}
	return s.Parent().SpanID().String()
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// A traced outbox item's job is the producer's trace: the relay's CONSUMER
// span continues the item's traceparent, the PRODUCER span of the job's
// send is inside it (the message carries it), and the job's stored
// traceId is that trace in X-Ray form.
func TestRelayedItemsJobIsItsProducersTrace(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	rec := tracetest.NewSpanRecorder()
	h.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	relay := &outbox.Relay{Enqueuer: h, TracerProvider: h.TracerProvider}
	str := events.NewStringAttribute
	img := map[string]events.DynamoDBAttributeValue{
		"pk": str("shop#signup-1"), "producer": str("shop"), "idempotencyKey": str("signup-1"), "type": str(welcome),
		"args": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"userId": str("u-1")}), "expiresAt": events.NewNumberAttribute("1900000000"),
		"traceparent": str("00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"),
	}
	resp, _ := relay.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		{EventID: "ev-1", EventName: "INSERT", Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: "1"}}}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	spans := byKind(rec)
	consumer, producer := spans[trace.SpanKindConsumer], spans[trace.SpanKindProducer]
	if consumer == nil || producer == nil || len(rec.Ended()) != 2 {
		t.Fatalf("spans %v; want the relay's and its send's", rec.Ended())
	}
	if consumer.SpanContext().TraceID().String() != "5759e988bd862e3fe1be46a994272793" || parentOf(consumer) != "53995c3f42cd8ad8" ||
		producer.Parent().SpanID() != consumer.SpanContext().SpanID() {
		t.Errorf("relay span %v (parent %s), send's parent %s: not one trace from the item", consumer.SpanContext(), parentOf(consumer), parentOf(producer))
	}
	jobID := message.DeriveMessageID("outbox:shop", "signup-1")
	job, err := w.Get(context.Background(), jobID)
	if err != nil || job.TraceID != "1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("job traceId %q (%v); want the item's trace", job.TraceID, err)
	}
	if sent := w.messages(); len(sent) != 1 || sent[0].TraceHeader != engine.FormatXRay(producer.SpanContext()) {
		t.Errorf("the message's trace header %v; want the send's span", sent)
	}
}
