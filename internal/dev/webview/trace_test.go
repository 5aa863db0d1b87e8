package webview

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/otlp"
)

// fakeTraces is a TraceReader over fixed spans of one job.
type fakeTraces struct {
	jobID   string
	traceID string
	spans   []otlp.Span
}

func (f fakeTraces) Trace(jobID string) (string, []otlp.Span) {
	if jobID != f.jobID {
		return "", nil
	}
	return f.traceID, f.spans
}

// requestTrace is one job's trace: the request, its send, the worker's
// record span under the send and linked to it, a client span under that,
// and a copy's record span of another trace.
func requestTrace() fakeTraces {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	return fakeTraces{jobID: jobID, traceID: "5759e988bd862e3fe1be46a994272793", spans: []otlp.Span{
		{TraceID: "t1", SpanID: "aaaaaaaaaaaaaaa1", Name: "POST /v1/jobs/{type}", Kind: "server", Service: "enqueue", StartTime: at(0), EndTime: at(40)},
		{TraceID: "t1", SpanID: "aaaaaaaaaaaaaaa2", ParentSpanID: "aaaaaaaaaaaaaaa1", Name: "send default", Kind: "producer", Service: "enqueue", StartTime: at(10), EndTime: at(30)},
		{TraceID: "t1", SpanID: "aaaaaaaaaaaaaaa3", ParentSpanID: "aaaaaaaaaaaaaaa2", Name: "default process", Kind: "consumer", Service: "email", StartTime: at(100), EndTime: at(200),
			Links: []otlp.Link{{TraceID: "t1", SpanID: "aaaaaaaaaaaaaaa2"}}, Status: "error"},
		{TraceID: "t1", SpanID: "aaaaaaaaaaaaaaa4", ParentSpanID: "aaaaaaaaaaaaaaa3", Name: "SESv2.SendEmail", Kind: "client", Service: "email", StartTime: at(150), EndTime: at(190)},
		// A replayed request's lock: DynamoDB refuses the conditional put,
		// which is how the request finds the first one's answer.
		{TraceID: "t1", SpanID: "aaaaaaaaaaaaaaa5", ParentSpanID: "aaaaaaaaaaaaaaa1", Name: "DynamoDB.PutItem", Kind: "client", Service: "enqueue", StartTime: at(2), EndTime: at(8),
			Status: "error", StatusMessage: "operation error DynamoDB: PutItem, https response error StatusCode: 400, RequestID: x, ConditionalCheckFailedException: The conditional request failed"},
		{TraceID: "t2", SpanID: "bbbbbbbbbbbbbbb1", ParentSpanID: "ccccccccccccccc9", Name: "default process", Kind: "consumer", Service: "email", StartTime: at(300), EndTime: at(400),
			Links: []otlp.Link{{TraceID: "t9", SpanID: "ddddddddddddddd9"}}},
	}}
}

// The waterfall nests each span under its parent, in time order, places it
// on the trace's time line, and names what it links to.
func TestWaterfallNestsAndPlacesSpans(t *testing.T) {
	rows, _ := waterfall(requestTrace().spans)
	var got []string
	for _, r := range rows {
		got = append(got, strings.Repeat("  ", r.Depth)+r.Name)
	}
	want := []string{"POST /v1/jobs/{type}", "  DynamoDB.PutItem", "  send default", "    default process", "      SESv2.SendEmail", "default process"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	server, record, cp := rows[0], rows[3], rows[5]
	if server.Left != 0 || server.Width != 10 || record.Left != 25 || record.Width != 25 || cp.Left != 75 {
		t.Errorf("placed at %v+%v, %v+%v, %v; want 0+10, 25+25, 75", server.Left, server.Width, record.Left, record.Width, cp.Left)
	}
	if len(record.LinkedTo) != 1 || record.LinkedTo[0].Name != "send default" || !record.LinkedTo[0].Here {
		t.Errorf("the record's link %+v; want the send, in this trace", record.LinkedTo)
	}
	if !cp.ParentMissing || len(cp.LinkedTo) != 1 || cp.LinkedTo[0].Here {
		t.Errorf("the copy: %+v", cp)
	}
}

// The page draws it: a row per span with its bar and its links; an unknown
// job is 404, and a stack without traces says so.
func TestTracePage(t *testing.T) {
	h := New(Sources{Traces: requestTrace(), Job: fakeJobReader{jobID: jobAt("Succeeded")}}, quietOptions())
	code, body := get(t, h, "/_local/jobs/"+jobID+"/trace")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{
		`<tr id="span-aaaaaaaaaaaaaaa3" data-span="aaaaaaaaaaaaaaa3" data-parent="aaaaaaaaaaaaaaa2" data-depth="2" class="status-error">`,
		`<rect class="kind-consumer" x="25.000%" y="1" width="25.000%" height="10"></rect>`,
		`<a href="#span-aaaaaaaaaaaaaaa2">send default</a>`,
		`(not in this trace)`,
		// Durations as a person reads them, Go's own form on hover.
		`<td class="num" title="100ms">100 ms</td>`,
		`aria-label="40 ms"`,
		`, 400 ms</small>`,
		// The trace id in the form the API and the job's page show, the
		// W3C form on hover.
		`trace <code title="W3C trace-id 5759e988bd862e3fe1be46a994272793">1-5759e988-bd862e3fe1be46a994272793</code>`,
		// The replay's refused put: no error, and said why.
		`data-depth="1" class="status-expected">`,
		`<span class="note expected">condition not met, as expected`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the waterfall lacks %s", want)
		}
	}
	for _, notWant := range []string{`<td class="num">100ms</td>`, `<code>5759e988bd862e3fe1be46a994272793</code>`} {
		if strings.Contains(body, notWant) {
			t.Errorf("the waterfall shows %s", notWant)
		}
	}
	// A conditional write refused is expected only as a client span's
	// ConditionalCheckFailed; any other error stays an error.
	for _, sp := range []otlp.Span{
		{Kind: "client", Status: "error", StatusMessage: "ThrottlingException: slow down"},
		{Kind: "server", Status: "error", StatusMessage: "ConditionalCheckFailedException"},
		{Kind: "client", Status: "unset"},
	} {
		if got := expectedError(sp); got != "" {
			t.Errorf("expectedError(%+v) = %q; want none", sp, got)
		}
	}
	if code, _ := get(t, h, "/_local/jobs/other/trace"); code != http.StatusNotFound {
		t.Errorf("unknown job: %d; want 404", code)
	}
	_, page := get(t, h, "/_local/jobs/"+jobID)
	if !strings.Contains(page, `href="/_local/jobs/`+jobID+`/trace"`) {
		t.Error("the job's page does not link its waterfall")
	}
	if _, body := get(t, New(Sources{}, quietOptions()), "/_local/jobs/"+jobID+"/trace"); !strings.Contains(body, "traces are off") {
		t.Error("a stack without traces does not say so")
	}
}
