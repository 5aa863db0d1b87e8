package engine_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
)

// guideTraceparent is guideHeader's span as a W3C traceparent, sampled.
const guideTraceparent = "00-" + guideTrace + "-" + guideSpan + "-01"

// A traceparent round-trips with its sampled flag; a malformed one is
// ignored, never fatal.
func TestTraceparentRoundTrips(t *testing.T) {
	sc, ok := engine.ParseTraceparent(guideTraceparent)
	if !ok || sc.TraceID().String() != guideTrace || sc.SpanID().String() != guideSpan || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("ParseTraceparent(%q) = %v %v", guideTraceparent, sc, ok)
	}
	if got := engine.FormatTraceparent(sc); got != guideTraceparent {
		t.Errorf("FormatTraceparent = %q; want %q", got, guideTraceparent)
	}
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: sc.SpanID()})
	if got := engine.FormatTraceparent(unsampled); got != "00-"+guideTrace+"-"+guideSpan+"-00" {
		t.Errorf("unsampled: %q", got)
	}
	if engine.FormatTraceparent(trace.SpanContext{}) != "" {
		t.Error("an invalid span context has a traceparent")
	}
	for _, v := range []string{"", "garbage", "00-" + guideTrace + "-0000000000000000-01", "00-00000000000000000000000000000000-" + guideSpan + "-01",
		"ff-" + guideTrace + "-" + guideSpan + "-01", "00-" + guideTrace + "-" + guideSpan, strings.Repeat("0", 5000)} {
		if sc, ok := engine.ParseTraceparent(v); ok || sc.IsValid() {
			t.Errorf("ParseTraceparent(%.40q) = %v; want it ignored", v, sc)
		}
	}
}
