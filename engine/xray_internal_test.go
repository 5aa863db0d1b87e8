package engine

import (
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// formatXRay's root and parent are the trace and span ids a record's log
// lines name, cut from the header its sends carry: they must be what
// XRayTraceID and SpanID.String write, sampled or not, with a lineage or
// without.
func TestFormatXRayCutsRootAndParent(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	lineage, _ := (trace.TraceState{}).Insert(xrayLineageKey, "a87bd80c:1|68fd508a:5")
	for _, sc := range []trace.SpanContext{
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: lineage}),
	} {
		h, root, parent := formatXRay(sc)
		if root != XRayTraceID(sc.TraceID()) || parent != sc.SpanID().String() {
			t.Errorf("formatXRay(%v) cut root %q, parent %q; want %q, %q", sc, root, parent, XRayTraceID(sc.TraceID()), sc.SpanID().String())
		}
		back, ok := ParseXRay(h)
		if !ok || back.TraceID() != tid || back.SpanID() != sid || back.IsSampled() != sc.IsSampled() || back.TraceState().Get(xrayLineageKey) != sc.TraceState().Get(xrayLineageKey) {
			t.Errorf("header %q reads back as %v", h, back)
		}
	}
	if h, root, parent := formatXRay(trace.SpanContext{}); h+root+parent != "" {
		t.Errorf("an invalid span context wrote %q, %q, %q", h, root, parent)
	}
}
