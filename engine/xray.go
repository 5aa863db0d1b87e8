package engine

import (
	"context"
	"encoding/hex"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// XRayHeader is the HTTP header of an X-Ray trace header. SQS carries the
// same value in a message's AWSTraceHeader system attribute
// (RecordTraceHeader).
const XRayHeader = "X-Amzn-Trace-Id"

// xrayLineageKey is the trace-state key an X-Ray header's Lineage field
// travels under between Extract and Inject (Lambda's recursive-loop
// detection reads it; it is opaque here).
const xrayLineageKey = "xray-lineage"

// maxXRayHeader bounds the header Extract reads; a longer one is ignored.
const maxXRayHeader = 1024

// XRay is an OpenTelemetry TextMapPropagator of the X-Ray trace header,
//
//	Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1
//
// the form SQS's AWSTraceHeader, Lambda's _X_AMZN_TRACE_ID and the
// X-Amzn-Trace-Id HTTP header share. The rules:
//
//   - Root is 1-<8 hex>-<24 hex>: its 32 hex digits are the W3C trace id
//     (the first 8 are what X-Ray calls the epoch seconds; to propagation
//     they are opaque), so a job's X-Ray traceId and its spans' trace id
//     are one trace;
//   - Parent is the 16-hex span id of the caller's span; a header without
//     it (or with a zero one) names no span to continue, and Extract leaves
//     the context alone;
//   - Sampled=1 sets the sampled flag; Sampled=0, Sampled=? (a decision
//     asked of the receiver) and none leave it clear; Inject writes 1 or 0;
//   - Lineage is kept as it came, in the span context's trace state, and
//     written again by Inject;
//   - keys are read case-insensitively, unknown fields are skipped, and a
//     malformed header is ignored, never an error.
//
// The AWS contrib propagators of OpenTelemetry Go are deprecated; this one
// has no dependency beyond the OTel API.
type XRay struct{}

var _ propagation.TextMapPropagator = XRay{}

// Inject writes the X-Ray header of ctx's span context to carrier (nothing
// for an invalid one).
func (XRay) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if h := FormatXRay(trace.SpanContextFromContext(ctx)); h != "" {
		carrier.Set(XRayHeader, h)
	}
}

// Extract returns ctx with the remote span context of carrier's X-Ray
// header, or ctx unchanged when it has none or a malformed one.
func (XRay) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	sc, ok := ParseXRay(carrier.Get(XRayHeader))
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Fields is the one header XRay reads and writes.
func (XRay) Fields() []string { return []string{XRayHeader} }

// ParseXRay reads an X-Ray trace header into a remote span context (the
// rules are XRay's); ok is false when the header names no valid span.
func ParseXRay(header string) (trace.SpanContext, bool) {
	if header == "" || len(header) > maxXRayHeader {
		return trace.SpanContext{}, false
	}
	var (
		cfg              trace.SpanContextConfig
		root, parent     bool
		lineage, sampled string
	)
	for part := range strings.SplitSeq(header, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "root":
			cfg.TraceID, root = xrayTraceID(strings.TrimSpace(v))
		case "parent":
			cfg.SpanID, parent = xraySpanID(strings.TrimSpace(v))
		case "sampled":
			sampled = strings.TrimSpace(v)
		case "lineage":
			lineage = strings.TrimSpace(v)
		}
	}
	if !root || !parent {
		return trace.SpanContext{}, false
	}
	if sampled == "1" {
		cfg.TraceFlags = trace.FlagsSampled
	}
	if lineage != "" {
		if ts, err := (trace.TraceState{}).Insert(xrayLineageKey, lineage); err == nil {
			cfg.TraceState = ts
		}
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// XRayRoot reads the Root of an X-Ray trace header as a W3C trace id, with
// or without a Parent (a header with a Root alone names a trace its caller
// started without a span); ok is false when it has no valid Root.
func XRayRoot(header string) (trace.TraceID, bool) {
	if len(header) > maxXRayHeader {
		return trace.TraceID{}, false
	}
	for part := range strings.SplitSeq(header, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "root") {
			return xrayTraceID(strings.TrimSpace(v))
		}
	}
	return trace.TraceID{}, false
}

// FormatXRay writes sc as an X-Ray trace header, Root, Parent, Sampled and
// (when sc carries one) Lineage; "" for an invalid span context.
func FormatXRay(sc trace.SpanContext) string {
	h, _, _ := formatXRay(sc)
	return h
}

// formatXRay is FormatXRay, and the header's Root (the trace id in X-Ray
// form, as XRayTraceID writes it) and Parent (the span id), cut from it:
// one allocation for the three.
func formatXRay(sc trace.SpanContext) (header, root, parent string) {
	if !sc.IsValid() {
		return "", "", ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var buf [96]byte
	b := append(buf[:0], "Root=1-"...)
	b = hex.AppendEncode(b, tid[:4])
	b = append(b, '-')
	b = hex.AppendEncode(b, tid[4:])
	b = append(b, ";Parent="...)
	b = hex.AppendEncode(b, sid[:])
	if sc.IsSampled() {
		b = append(b, ";Sampled=1"...)
	} else {
		b = append(b, ";Sampled=0"...)
	}
	if l := sc.TraceState().Get(xrayLineageKey); l != "" {
		b = append(b, ";Lineage="...)
		b = append(b, l...)
	}
	header = string(b)
	// Root=1-<8>-<24>;Parent=<16>: the root is bytes 5 to 40, the parent
	// 48 to 64.
	return header, header[5:40], header[48:64]
}

// XRayTraceID writes a W3C trace id in X-Ray form (1-<8 hex>-<24 hex>), as
// a job's traceId shows it; "" for an invalid one.
func XRayTraceID(id trace.TraceID) string {
	if !id.IsValid() {
		return ""
	}
	var b [35]byte
	b[0], b[1], b[10] = '1', '-', '-'
	hex.Encode(b[2:10], id[:4])
	hex.Encode(b[11:], id[4:])
	return string(b[:])
}

// xrayTraceID reads a Root value, 1-<8 hex>-<24 hex>, as a W3C trace id.
func xrayTraceID(v string) (trace.TraceID, bool) {
	var id trace.TraceID
	if len(v) != 35 || v[0] != '1' || v[1] != '-' || v[10] != '-' {
		return id, false
	}
	if _, err := hex.Decode(id[:4], []byte(v[2:10])); err != nil {
		return id, false
	}
	if _, err := hex.Decode(id[4:], []byte(v[11:])); err != nil {
		return id, false
	}
	return id, id.IsValid()
}

// xraySpanID reads a Parent value, 16 hex digits, as a span id.
func xraySpanID(v string) (trace.SpanID, bool) {
	var id trace.SpanID
	if len(v) != 16 {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(v)); err != nil {
		return id, false
	}
	return id, id.IsValid()
}
