package webview

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/dev/otlp"
)

// TraceReader reads a job's trace: its trace id ("" when no span names the
// job) and its spans (otlp.Receiver.Trace).
type TraceReader interface {
	Trace(jobID string) (traceID string, spans []otlp.Span)
}

// waterfallRow is one span of the waterfall (otlp.Waterfall) with where
// its bar starts and how long it is, in percent of the trace's time, and
// the spans it links to.
type waterfallRow struct {
	otlp.Placed
	Indent      int // pixels
	Left, Width float64
	LinkedTo    []waterfallLink
	ShortID     string
	// Expected says why a span with an Error status is no failure (a
	// conditional write that found its item: see expectedError); "" for
	// any other span.
	Expected string
}

// StatusClass is the row's class: its status, or "expected" for an
// Error status that is the expected answer to a conditional write.
func (r waterfallRow) StatusClass() string {
	if r.Expected != "" {
		return "expected"
	}
	return r.Status
}

// expectedError is what the page says beside a client span whose Error is
// DynamoDB refusing a conditional write: the write found the item it
// guards against, which is how a replayed request finds the first one's
// stored answer and a second delivery its twin's marker. The code goes on from
// that answer; a failure it could not handle shows on the span above.
func expectedError(s otlp.Span) string {
	if s.Status != "error" || s.Kind != "client" || !strings.Contains(s.StatusMessage, "ConditionalCheckFailed") {
		return ""
	}
	return "condition not met, as expected: the conditional write found the item already there " +
		"(a replayed request finds the first one's stored answer; a second delivery, its twin's marker)"
}

// waterfallLink names a span a row links to (its name when the trace holds
// it).
type waterfallLink struct {
	SpanID, Name string
	Here         bool
}

// waterfall is the page's rows of spans.
func waterfall(spans []otlp.Span) ([]waterfallRow, time.Duration) {
	placed, total := otlp.Waterfall(spans)
	span := max(total, time.Microsecond)
	rows := make([]waterfallRow, 0, len(placed))
	for _, p := range placed {
		row := waterfallRow{Placed: p, Indent: 16 * p.Depth, ShortID: shortID(p.SpanID), Expected: expectedError(p.Span)}
		row.Width = max(100*float64(p.Duration)/float64(span), 0.5)
		row.Left = min(100*float64(p.Offset)/float64(span), 100-row.Width)
		for _, l := range p.Links {
			name := otlp.Name(spans, l.SpanID)
			row.LinkedTo = append(row.LinkedTo, waterfallLink{SpanID: l.SpanID, Name: name, Here: name != ""})
		}
		rows = append(rows, row)
	}
	return rows, total
}

// tracePageData is what trace.html renders.
type tracePageData struct {
	pageData
	JobID   string
	TraceID string
	Wired   bool
	Rows    []waterfallRow
	Total   time.Duration
}

// Pct writes a percentage for an SVG attribute.
func (tracePageData) Pct(f float64) string { return fmt.Sprintf("%.3f%%", f) }

// tracePage serves GET {prefix}jobs/{id}/trace: the job's spans as a
// waterfall, by service, nested under their parents, with their timings
// and the spans each links to.
func (h *handler) tracePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d := tracePageData{pageData: pageData{Prefix: h.opts.Prefix, Stage: h.opts.Stage, Now: h.opts.Now(), Title: "trace of " + shortID(id), NavBase: h.opts.Prefix},
		JobID: id, Wired: h.src.Traces != nil}
	status := http.StatusOK
	if d.Wired {
		var spans []otlp.Span
		d.TraceID, spans = h.src.Traces.Trace(id)
		d.Rows, d.Total = waterfall(spans)
		if d.TraceID == "" {
			status = http.StatusNotFound
		}
	}
	h.render(w, "trace.html", status, d)
}
