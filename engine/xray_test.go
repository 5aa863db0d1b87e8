package engine_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
)

// The header of AWS's X-Ray developer guide ("Tracing header"), with a
// Lineage as Lambda's recursive-loop detection writes it.
const (
	guideHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	guideTrace  = "5759e988bd862e3fe1be46a994272793"
	guideSpan   = "53995c3f42cd8ad8"
)

func TestParseXRayReadsTheDocumentedHeader(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		sampled      bool
		lineage      string
	}{
		{"sampled", guideHeader, true, ""},
		{"not sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", false, ""},
		{"decision asked of the receiver", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?", false, ""},
		{"no decision", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, ""},
		{"lineage", guideHeader + ";Lineage=a87bd80c:1|68fd508a:5", true, "a87bd80c:1|68fd508a:5"},
		{"fields in another order, spaced, other keys", " Sampled=1 ; Self=1-67891234-12456789abcdef012345678;parent=53995c3f42cd8ad8; root=1-5759e988-bd862e3fe1be46a994272793", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, ok := engine.ParseXRay(tc.header)
			if !ok || sc.TraceID().String() != guideTrace || sc.SpanID().String() != guideSpan || !sc.IsRemote() {
				t.Fatalf("ParseXRay(%q) = %v %s/%s remote %t", tc.header, ok, sc.TraceID(), sc.SpanID(), sc.IsRemote())
			}
			if sc.IsSampled() != tc.sampled {
				t.Errorf("sampled %t; want %t", sc.IsSampled(), tc.sampled)
			}
			if got := sc.TraceState().Get("xray-lineage"); got != tc.lineage {
				t.Errorf("lineage %q; want %q", got, tc.lineage)
			}
			if got := engine.XRayTraceID(sc.TraceID()); got != "1-5759e988-bd862e3fe1be46a994272793" {
				t.Errorf("XRayTraceID = %q; want the header's Root", got)
			}
		})
	}
}

// A header that names no valid span is ignored, never fatal.
func TestParseXRayIgnoresMalformedHeaders(t *testing.T) {
	for _, h := range []string{
		"",
		"garbage",
		";;;=;==",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",                 // no Parent: nothing to continue
		"Parent=53995c3f42cd8ad8;Sampled=1",                                  // no Root
		"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",   // another version
		"Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8",    // short
		"Root=1-5759e988-bd862e3fe1be46a9942727933;Parent=53995c3f42cd8ad8",  // long
		"Root=1-5759e98g-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",   // not hex
		"Root=1-5759e988_bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",   // wrong separator
		"Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8",   // zero trace id
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000",   // zero span id
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad",    // short span id
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8zz", // long span id
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;" + strings.Repeat("x", 2000),
	} {
		if sc, ok := engine.ParseXRay(h); ok || sc.IsValid() {
			t.Errorf("ParseXRay(%q) = %v, valid %t; want nothing", h, ok, sc.IsValid())
		}
		ctx := engine.XRay{}.Extract(context.Background(), propagation.MapCarrier{engine.XRayHeader: h})
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("Extract(%q) made a span context", h)
		}
	}
}

// Extract then Inject gives the header back: the ids, the sampling
// decision and the lineage; a W3C context injects as the same trace.
func TestXRayRoundTrips(t *testing.T) {
	for _, h := range []string{
		guideHeader,
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
		guideHeader + ";Lineage=a87bd80c:1",
	} {
		ctx := engine.XRay{}.Extract(context.Background(), propagation.MapCarrier{engine.XRayHeader: h})
		out := propagation.MapCarrier{}
		engine.XRay{}.Inject(ctx, out)
		if got := out[engine.XRayHeader]; got != h {
			t.Errorf("round trip of %q gave %q", h, got)
		}
	}
	// From W3C traceparent to X-Ray and back to W3C.
	w3c := propagation.TraceContext{}
	ctx := w3c.Extract(context.Background(), propagation.MapCarrier{"traceparent": "00-" + guideTrace + "-" + guideSpan + "-01"})
	out := propagation.MapCarrier{}
	engine.XRay{}.Inject(ctx, out)
	if out[engine.XRayHeader] != guideHeader {
		t.Fatalf("traceparent as X-Ray: %q; want %q", out[engine.XRayHeader], guideHeader)
	}
	back := propagation.MapCarrier{}
	w3c.Inject(engine.XRay{}.Extract(context.Background(), out), back)
	if back["traceparent"] != "00-"+guideTrace+"-"+guideSpan+"-01" {
		t.Fatalf("back to traceparent: %q", back["traceparent"])
	}
	// Nothing to inject: nothing written.
	empty := propagation.MapCarrier{}
	engine.XRay{}.Inject(context.Background(), empty)
	if len(empty) != 0 || engine.FormatXRay(trace.SpanContext{}) != "" || engine.XRayTraceID(trace.TraceID{}) != "" {
		t.Fatalf("an invalid span context wrote %v", empty)
	}
	if f := (engine.XRay{}).Fields(); len(f) != 1 || f[0] != engine.XRayHeader {
		t.Fatalf("Fields = %v", f)
	}
}

func FuzzParseXRay(f *testing.F) {
	f.Add(guideHeader)
	f.Add(guideHeader + ";Lineage=a87bd80c:1")
	f.Add("Root=1-;Parent=;Sampled=")
	f.Fuzz(func(t *testing.T, h string) {
		sc, ok := engine.ParseXRay(h)
		if !ok {
			return
		}
		// What parses formats to a header that parses to the same span.
		again, ok := engine.ParseXRay(engine.FormatXRay(sc))
		if !ok || again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.IsSampled() != sc.IsSampled() {
			t.Fatalf("%q: %v then %v", h, sc, again)
		}
	})
}

// XRayRoot reads the Root of a header, with or without a Parent, and
// nothing else.
func TestXRayRootReadsTheRootAlone(t *testing.T) {
	want := "5759e988bd862e3fe1be46a994272793"
	for h, ok := range map[string]bool{
		"Root=1-5759e988-bd862e3fe1be46a994272793":                                       true,
		"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1":                             true,
		"sampled=0; root = 1-5759e988-bd862e3fe1be46a994272793 ;Parent=53995c3f42cd8ad8": true,
		"":                        false,
		"Parent=53995c3f42cd8ad8": false,
		"Root=2-5759e988-bd862e3fe1be46a994272793": false,
		"Root=1-5759e98g-bd862e3fe1be46a994272793": false,
		"Root=1-00000000-000000000000000000000000": false,
		"Root=1-5759e988-bd862e3fe1be46a99427279":  false,
	} {
		id, got := engine.XRayRoot(h)
		if got != ok || (ok && id.String() != want) {
			t.Errorf("XRayRoot(%q) = %s, %t; want %t", h, id, got, ok)
		}
	}
}
