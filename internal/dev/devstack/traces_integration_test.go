//go:build integration

package devstack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/internal/vclock"
)

// traceAnswer is GET /_local/api/traces/{jobId}.
type traceAnswer struct {
	JobID   string      `json:"jobId"`
	TraceID string      `json:"traceId"`
	Spans   []otlp.Span `json:"spans"`
}

// TestOneRequestsJobIsOneTrace runs the local stack with its OTLP
// receiver: a job enqueued through the API is one trace from the request
// to the worker — the API's SERVER span, its PRODUCER span inside it, and
// the worker's CONSUMER span continuing the send and linked to it, with
// the CLIENT spans of both functions' AWS calls under them, every one
// naming the job (id and type) — each flushed by its function before its
// invocation returned; the job's traceId is that trace. A copy sent
// straight to the queue, with no trace of its own, is in the answer too,
// its spans naming the job as well.
func TestOneRequestsJobIsOneTrace(t *testing.T) {
	h := startHookStack(t, devstack.Chaos{})
	jobID := h.enqueue(t, "evt-traced")
	h.waitSucceeded(t, jobID)
	h.sendCopy(t, jobID, "evt-traced")
	h.waitOutcomes(t, jobID, 2)

	got := h.trace(t, jobID, func(a traceAnswer) bool { return len(kinds(a.Spans)["consumer"]) >= 2 })
	k := kinds(got.Spans)
	if len(k["server"]) != 1 || len(k["producer"]) != 1 || len(k["consumer"]) != 2 {
		t.Fatalf("spans by kind %v; want the request, its send and two deliveries:\n%+v", count2(k), got.Spans)
	}
	server, producer := k["server"][0], k["producer"][0]
	var first, copied otlp.Span
	for _, c := range k["consumer"] {
		if c.TraceID == got.TraceID {
			first = c
		} else {
			copied = c
		}
	}
	switch {
	case server.Name != "POST /v1/jobs/{type}" || server.Service != "enqueue" || server.TraceID != got.TraceID:
		t.Errorf("server span %+v (trace %s)", server, got.TraceID)
	case producer.Name != "send webhooks" || producer.ParentSpanID != server.SpanID:
		t.Errorf("producer span %+v", producer)
	case first.Name != "webhooks process" || first.Service != "webhook" || first.ParentSpanID != producer.SpanID ||
		len(first.Links) != 1 || first.Links[0].SpanID != producer.SpanID:
		t.Errorf("the worker's span %+v does not continue and link the send %s", first, producer.SpanID)
	case copied.SpanID == "":
		t.Errorf("the copy's span is missing: %+v", got.Spans)
	}
	// The AWS calls: the request layer's and the send's in the API, the
	// lease's and the claim's in the worker, each under its function's span.
	under := map[string]string{} // service/name of each CLIENT span → its parent's service/name
	byID := map[string]otlp.Span{}
	for _, s := range got.Spans {
		byID[s.SpanID] = s
	}
	for _, c := range k["client"] {
		if c.TraceID == got.TraceID {
			p := byID[c.ParentSpanID]
			under[c.Service+"/"+c.Name] = p.Service + "/" + p.Name
		}
	}
	if under["enqueue/SQS.SendMessage"] != "enqueue/send webhooks" || !hasPrefix(under, "enqueue/DynamoDB.") || !hasPrefix(under, "webhook/DynamoDB.") {
		t.Errorf("the trace's CLIENT spans (under their parents) %v; want the API's DynamoDB calls and its SendMessage under the send, and the worker's", under)
	}
	everySpanNamesTheJob(t, got.Spans, jobID, contract.WebhookDeliver.Name)
	h.wantJobTrace(t, jobID, got.TraceID)
	if resp, err := http.Get(h.l.APIURL + devstack.TracesPath + "no-such-job"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the trace of no job: %v %v; want 404", resp, err)
	}
}

// TestOutboxJobsTraceIncludesTheRelay: a producer that traces writes its
// outbox item with client.OutboxPutContext inside its span; the relay's
// span continues that span, the job's send is inside the relay's span,
// and the worker's continues the send: one trace from the producer's
// transaction to the webhook, the job's traceId.
func TestOutboxJobsTraceIncludesTheRelay(t *testing.T) {
	h := startHookStack(t, devstack.Chaos{})
	ctx, producerSpan := sdktrace.NewTracerProvider().Tracer("producer").Start(context.Background(), "signup")
	defer producerSpan.End()
	psc := producerSpan.SpanContext()
	outboxTable, ok := h.l.Stack.Physical("OutboxTable")
	if !ok {
		t.Fatal("the stack has no OutboxTable")
	}
	put, jobID, err := client.OutboxPutContext(ctx, outboxTable.Name, client.OutboxJob{Producer: "shop", IdempotencyKey: "order-1",
		Type: client.TypeWebhookDeliver, Args: client.WebhookDeliverArgs{EventID: "evt-outbox"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(moto.Config(h.l.Endpoint, moto.Region))
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}}); err != nil {
		t.Fatal(err)
	}
	got := h.trace(t, jobID, func(a traceAnswer) bool { return len(kinds(a.Spans)["consumer"]) >= 2 })
	var relay, send, worker otlp.Span
	for _, s := range got.Spans {
		switch {
		case s.Name == outbox.SpanName:
			relay = s
		case s.Kind == "producer":
			send = s
		case s.Name == "webhooks process":
			worker = s
		}
	}
	switch {
	case got.TraceID != psc.TraceID().String():
		t.Errorf("the job's trace %s; want the producer's %s:\n%+v", got.TraceID, psc.TraceID(), got.Spans)
	case relay.Service != "outbox" || relay.Kind != "consumer" || relay.ParentSpanID != psc.SpanID().String() ||
		len(relay.Links) != 1 || relay.Links[0].SpanID != psc.SpanID().String():
		t.Errorf("the relay's span %+v does not continue and link the producer's %s", relay, psc.SpanID())
	case send.Name != "send webhooks" || send.Service != "outbox" || send.ParentSpanID != relay.SpanID:
		t.Errorf("the send %+v is not inside the relay's span %s", send, relay.SpanID)
	case worker.Service != "webhook" || worker.ParentSpanID != send.SpanID || worker.TraceID != got.TraceID:
		t.Errorf("the worker's span %+v does not continue the send %s", worker, send.SpanID)
	}
	everySpanNamesTheJob(t, got.Spans, jobID, contract.WebhookDeliver.Name)
	h.wantJobTrace(t, jobID, got.TraceID)
}

// TestScheduledJobsTraceSurvivesItsSchedule: a job due in 20 minutes
// waits in a one-time schedule, which EventBridge Scheduler (here the
// stack's emulator) sends with no trace header. The enqueue's PRODUCER
// span "create webhooks" put its context in the schedule's input; when
// the schedule fires (the emulator's clock moved on 21 minutes), the
// worker's span continues and links it: the request, the schedule's
// creation and the delivery are one trace, the job's traceId.
func TestScheduledJobsTraceSurvivesItsSchedule(t *testing.T) {
	clock := filepath.Join(t.TempDir(), "clock")
	if err := vclock.Write(clock, 0); err != nil {
		t.Fatal(err)
	}
	h := startHookStack(t, devstack.Chaos{Clock: &devstack.ChaosClock{Path: clock, Poll: 200 * time.Millisecond}})
	res, err := h.api.WebhookDeliver(context.Background(), client.WebhookDeliverArgs{EventID: "evt-later"},
		client.EnqueueOptions{IdempotencyKey: "hook-later", RunAt: time.Now().Add(20 * time.Minute)})
	if err != nil || res.State != client.StateScheduled {
		t.Fatalf("enqueue: %+v, %v; want a scheduled job", res, err)
	}
	if err := vclock.Write(clock, 21*time.Minute); err != nil {
		t.Fatal(err)
	}
	h.waitSucceeded(t, res.JobID)
	got := h.trace(t, res.JobID, func(a traceAnswer) bool { return len(kinds(a.Spans)["consumer"]) >= 1 })
	k := kinds(got.Spans)
	if len(k["server"]) == 0 || len(k["producer"]) != 1 || len(k["consumer"]) != 1 {
		t.Fatalf("spans by kind %v; want the request, its schedule and the delivery:\n%+v", count2(k), got.Spans)
	}
	server, create, worker := k["server"][0], k["producer"][0], k["consumer"][0]
	switch {
	case create.Name != "create webhooks" || create.ParentSpanID != server.SpanID || create.TraceID != got.TraceID:
		t.Errorf("the schedule's PRODUCER span %+v", create)
	case worker.Name != "webhooks process" || worker.TraceID != got.TraceID || worker.ParentSpanID != create.SpanID ||
		len(worker.Links) != 1 || worker.Links[0].SpanID != create.SpanID:
		t.Errorf("the worker's span %+v does not continue the schedule's %s", worker, create.SpanID)
	}
	var scheduled bool
	for _, c := range k["client"] {
		scheduled = scheduled || (c.Name == "Scheduler.CreateSchedule" && c.ParentSpanID == create.SpanID)
	}
	if !scheduled {
		t.Errorf("no Scheduler.CreateSchedule CLIENT span under the schedule's span: %+v", k["client"])
	}
	everySpanNamesTheJob(t, got.Spans, res.JobID, contract.WebhookDeliver.Name)
	h.wantJobTrace(t, res.JobID, got.TraceID)
}

// trace polls the local traces API for the job's trace until done says it
// is complete (30 seconds at most: each function flushes before it
// answers, but the answer of the last may still be on its way).
func (h *hookStack) trace(t *testing.T, jobID string, done func(traceAnswer) bool) traceAnswer {
	t.Helper()
	var got traceAnswer
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(h.l.APIURL + devstack.TracesPath + jobID)
		if err != nil {
			t.Fatal(err)
		}
		got = traceAnswer{}
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if done(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wantJobTrace fails t unless the job's stored traceId is traceID in
// X-Ray form (read from the jobs table: an outbox job is not the test
// caller's to GET).
func (h *hookStack) wantJobTrace(t *testing.T, jobID, traceID string) {
	t.Helper()
	cfg := moto.Config(h.l.Endpoint, moto.Region)
	jobsTable, _ := h.l.Stack.Physical("JobsTable")
	markers, _ := h.l.Stack.Physical("MarkersTable")
	db := dynamodb.NewFromConfig(cfg)
	job, err := jobs.NewStore(db, jobsTable.Name, dynamostore.New(db, markers.Name)).Get(context.Background(), jobID)
	if err != nil || len(traceID) != 32 || job.TraceID != "1-"+traceID[:8]+"-"+traceID[8:] {
		t.Errorf("job traceId %q (%v); want the spans' trace %s in X-Ray form", job.TraceID, err, traceID)
	}
}

// everySpanNamesTheJob fails t for each span that does not carry the
// job's id and type.
func everySpanNamesTheJob(t *testing.T, spans []otlp.Span, jobID, jobType string) {
	t.Helper()
	for _, s := range spans {
		if s.Attributes[engine.AttrJobID] != jobID || s.Attributes[engine.AttrJobType] != jobType {
			t.Errorf("%s span %s %q does not name the job %s (%s): %v", s.Service, s.Kind, s.Name, jobID, jobType, s.Attributes)
		}
	}
}

func hasPrefix(m map[string]string, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func kinds(spans []otlp.Span) map[string][]otlp.Span {
	out := map[string][]otlp.Span{}
	for _, s := range spans {
		out[s.Kind] = append(out[s.Kind], s)
	}
	return out
}

func count2(k map[string][]otlp.Span) map[string]int {
	out := map[string]int{}
	for kind, s := range k {
		out[kind] = len(s)
	}
	return out
}
