package otlp

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The OTel SDK's own OTLP/HTTP exporter (protobuf) delivers to the
// receiver, and a job's trace reads back: its trace's spans, parents,
// kinds, services, links, and a span of another trace that names the job.
func TestReceiverKeepsWhatTheExporterSends(t *testing.T) {
	r, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	provider := func(service string) *sdktrace.TracerProvider {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(r.URL+"/v1/traces"))
		if err != nil {
			t.Fatal(err)
		}
		return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	}
	api, worker := provider("enqueue"), provider("email")
	job := attribute.String(JobIDAttribute, "job-1")
	sctx, server := api.Tracer("t").Start(ctx, "POST /v1/jobs/{type}", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(job))
	_, send := api.Tracer("t").Start(sctx, "send default", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(job))
	send.SetStatus(codes.Error, "SQS: SendMessage, throttled")
	send.End()
	server.End()
	_, record := worker.Tracer("t").Start(trace.ContextWithRemoteSpanContext(ctx, send.SpanContext()), "default process",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(trace.Link{SpanContext: send.SpanContext()}), trace.WithAttributes(job))
	record.End()
	_, copySpan := worker.Tracer("t").Start(ctx, "default process", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(job))
	copySpan.End()
	_, other := worker.Tracer("t").Start(ctx, "unrelated")
	other.End()

	traceID, spans := r.Trace("job-1")
	if traceID != server.SpanContext().TraceID().String() || len(spans) != 4 {
		t.Fatalf("trace %s, %d spans %+v; want the request's trace with its 3 spans and the copy's", traceID, len(spans), spans)
	}
	byName := map[string]Span{}
	for _, s := range spans[:3] {
		byName[s.Name] = s
	}
	s, p, c := byName["POST /v1/jobs/{type}"], byName["send default"], byName["default process"]
	switch {
	case s.Kind != "server" || s.Service != "enqueue" || s.ParentSpanID != "":
		t.Errorf("server span %+v", s)
	case p.Kind != "producer" || p.ParentSpanID != s.SpanID || p.Status != "error" || p.StatusMessage != "SQS: SendMessage, throttled":
		t.Errorf("producer span %+v", p)
	case c.Kind != "consumer" || c.Service != "email" || c.ParentSpanID != p.SpanID || len(c.Links) != 1 || c.Links[0].SpanID != p.SpanID:
		t.Errorf("consumer span %+v", c)
	case c.Attributes[JobIDAttribute] != "job-1" || c.Status != "unset" || c.EndTime.Before(c.StartTime):
		t.Errorf("consumer span %+v", c)
	}
	if id, none := r.Trace("no-such-job"); id != "" || none != nil {
		t.Errorf("a job no span names: %s %v", id, none)
	}
}

// JSON is OTLP/HTTP too; anything else is 400.
func TestReceiverTakesJSONAndRefusesTheRest(t *testing.T) {
	r, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"dlq"}}]},` +
		`"scopeSpans":[{"spans":[{"traceId":"5759e988bd862e3fe1be46a994272793","spanId":"53995c3f42cd8ad8","name":"dlq process","kind":5,` +
		`"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"runstwice.job.id","value":{"stringValue":"job-2"}}]}]}]}]}`
	resp, err := http.Post(r.URL+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON export: %v %v", resp, err)
	}
	if id, spans := r.Trace("job-2"); id != "5759e988bd862e3fe1be46a994272793" || len(spans) != 1 || spans[0].Kind != "consumer" || spans[0].Service != "dlq" {
		t.Fatalf("the JSON span: %s %+v", id, spans)
	}
	for _, c := range []struct{ ct, body string }{{"application/json", "{not json"}, {"text/plain", "x"}, {"application/x-protobuf", "\xff\xff"}} {
		resp, err := http.Post(r.URL+"/v1/traces", c.ct, strings.NewReader(c.body))
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %q: %v %v; want 400", c.ct, c.body, resp.StatusCode, err)
		}
	}
}
