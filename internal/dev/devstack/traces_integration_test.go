//go:build integration

package devstack_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/otlp"
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
// the worker's CONSUMER span continuing the send and linked to it, every
// one naming the job — each flushed by its function before its
// invocation returned; the job's traceId is that trace. A copy sent
// straight to the queue, with no trace of its own, is in the answer too.
func TestOneRequestsJobIsOneTrace(t *testing.T) {
	h := startHookStack(t, devstack.Chaos{})
	jobID := h.enqueue(t, "evt-traced")
	h.waitSucceeded(t, jobID)
	h.sendCopy(t, jobID, "evt-traced")
	h.waitOutcomes(t, jobID, 2)

	var got traceAnswer
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(h.l.APIURL + devstack.TracesPath + jobID)
		if err != nil {
			t.Fatal(err)
		}
		got = traceAnswer{}
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if len(kinds(got.Spans)["consumer"]) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
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
	case copied.SpanID == "" || copied.Attributes[engine.AttrJobID] != jobID:
		t.Errorf("the copy's span is missing: %+v", copied)
	}
	for _, s := range []otlp.Span{server, producer, first} {
		if s.Attributes[engine.AttrJobID] != jobID {
			t.Errorf("span %s does not name the job: %v", s.Name, s.Attributes)
		}
	}
	job, err := h.api.Get(t.Context(), jobID)
	if err != nil || job.TraceID != "1-"+got.TraceID[:8]+"-"+got.TraceID[8:] {
		t.Errorf("job traceId %q (%v); want the spans' trace %s in X-Ray form", job.TraceID, err, got.TraceID)
	}
	if resp, err := http.Get(h.l.APIURL + devstack.TracesPath + "no-such-job"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the trace of no job: %v %v; want 404", resp, err)
	}
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
