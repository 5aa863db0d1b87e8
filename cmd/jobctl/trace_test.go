package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/otlp"
)

// jobs trace draws the local stack's answer: the spans nested under their
// parents, each with its bar, the record's link named; a job no span
// names is exit 3.
func TestJobsTracePrintsTheWaterfall(t *testing.T) {
	at := func(ms int) time.Time {
		return time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	spans := []otlp.Span{
		{TraceID: "t", SpanID: "0000000000000001", Name: "POST /v1/jobs/{type}", Kind: "server", Service: "enqueue", StartTime: at(0), EndTime: at(40)},
		{TraceID: "t", SpanID: "0000000000000002", ParentSpanID: "0000000000000001", Name: "send default", Kind: "producer", Service: "enqueue", StartTime: at(10), EndTime: at(30)},
		{TraceID: "t", SpanID: "0000000000000003", ParentSpanID: "0000000000000002", Name: "default process", Kind: "consumer", Service: "email",
			StartTime: at(100), EndTime: at(200), Status: "error", Links: []otlp.Link{{TraceID: "t", SpanID: "0000000000000002"}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tracesPath+"job-1" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"no span names it"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jobId": "job-1", "traceId": "t", "spans": spans})
	}))
	defer srv.Close()
	code, out, stderr := runOffline(t, "jobs", "trace", "job-1", "--api", srv.URL)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"job job-1: trace t, 3 spans, 200ms",
		"POST /v1/jobs/{type}",
		"\n  send default ",
		"\n    default process (error) ",
		"|                ████████████████|  send default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the waterfall lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runOffline(t, "jobs", "trace", "job-2", "--api", srv.URL); code != exitNotFound {
		t.Errorf("a job no span names: exit %d; want %d", code, exitNotFound)
	}
	if code, _, _ := runOffline(t, "--stage", "dev", "jobs", "trace", "job-1"); code != exitUsage {
		t.Errorf("a deployed stage without --api: exit %d; want %d (usage)", code, exitUsage)
	}
}
