// Package otlp is the local stack's OpenTelemetry receiver: OTLP over HTTP
// (POST /v1/traces, protobuf or JSON), the spans kept in memory, and a
// job's trace read back from them (Trace) for GET /_local/api/traces/{jobId},
// the web view's waterfall and `jobctl jobs trace`.
package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Span is one span as the receiver keeps it, in the form the traces API
// answers with.
type Span struct {
	TraceID      string         `json:"traceId"`
	SpanID       string         `json:"spanId"`
	ParentSpanID string         `json:"parentSpanId,omitempty"`
	Name         string         `json:"name"`
	Kind         string         `json:"kind"`
	Service      string         `json:"service"`
	StartTime    time.Time      `json:"startTime"`
	EndTime      time.Time      `json:"endTime"`
	Attributes   map[string]any `json:"attributes"`
	Links        []Link         `json:"links,omitempty"`
	Status       string         `json:"status"`
	// StatusMessage is the description of an Error status (the error's
	// text), "" for none.
	StatusMessage string `json:"statusMessage,omitempty"`
}

// Link is a span's link to another span.
type Link struct {
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId"`
}

// JobIDAttribute is the attribute every span of a job carries.
const JobIDAttribute = "runstwice.job.id"

// MaxSpans bounds what the receiver keeps; the oldest go first.
const MaxSpans = 100_000

// maxBody bounds one export request.
const maxBody = 16 << 20

// Receiver keeps the spans exported to it. It is safe for concurrent use.
type Receiver struct {
	mu    sync.Mutex
	spans []Span
	srv   *http.Server
	// URL is where it listens (http://host:port), once started.
	URL string
}

// Start listens on addr ("127.0.0.1:4318"; port 0 for any) and serves.
func Start(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/traces", r)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops serving.
func (r *Receiver) Close() error {
	if r.srv == nil {
		return nil
	}
	return r.srv.Close()
}

// ServeHTTP takes one OTLP/HTTP trace export, protobuf or JSON (by its
// Content-Type), and answers as OTLP/HTTP does, in the request's encoding.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		http.Error(w, "unreadable body: "+err.Error(), http.StatusBadRequest)
		return
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	var in coltrace.ExportTraceServiceRequest
	asJSON := ct == "application/json"
	switch {
	case asJSON:
		if body, err = hexIDs(body); err == nil {
			err = protojson.Unmarshal(body, &in)
		}
	case ct == "application/x-protobuf" || ct == "":
		err = proto.Unmarshal(body, &in)
	default:
		err = errors.New("the content type is neither application/x-protobuf nor application/json")
	}
	if err != nil {
		http.Error(w, "not an OTLP trace export: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&in)
	out := &coltrace.ExportTraceServiceResponse{}
	var b []byte
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
		b, _ = protojson.Marshal(out)
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(out)
	}
	_, _ = w.Write(b)
}

// add keeps the spans of an export.
func (r *Receiver) add(in *coltrace.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range in.GetResourceSpans() {
		service, _ := value(attr(rs.GetResource().GetAttributes(), "service.name")).(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, span(s, service))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	if over := len(r.spans) - MaxSpans; over > 0 {
		r.spans = slices.Delete(r.spans, 0, over)
	}
}

func span(s *tracepb.Span, service string) Span {
	out := Span{
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Service: service,
		Kind: kindName(s.GetKind()), StartTime: time.Unix(0, int64(s.GetStartTimeUnixNano())).UTC(),
		EndTime: time.Unix(0, int64(s.GetEndTimeUnixNano())).UTC(), Attributes: map[string]any{},
		Status: statusName(s.GetStatus().GetCode()), StatusMessage: s.GetStatus().GetMessage(),
	}
	for _, kv := range s.GetAttributes() {
		out.Attributes[kv.GetKey()] = value(kv.GetValue())
	}
	for _, l := range s.GetLinks() {
		out.Links = append(out.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
	}
	return out
}

func kindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "internal"
}

func statusName(c tracepb.Status_StatusCode) string {
	switch c {
	case tracepb.Status_STATUS_CODE_OK:
		return "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		return "error"
	}
	return "unset"
}

func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// value is an attribute's value as JSON shows it.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Trace returns the trace of job jobID: the trace of the earliest span
// that carries its id (the request's, or the send's), with every span of
// that trace and every other span that carries the id (a copy that came
// without the trace), by start time. The trace id is "" when no span names
// the job.
func (r *Receiver) Trace(jobID string) (traceID string, spans []Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first *Span
	for i := range r.spans {
		if s := &r.spans[i]; s.Attributes[JobIDAttribute] == jobID && (first == nil || s.StartTime.Before(first.StartTime)) {
			first = s
		}
	}
	if first == nil {
		return "", nil
	}
	traceID = first.TraceID
	for _, s := range r.spans {
		if s.TraceID == traceID || s.Attributes[JobIDAttribute] == jobID {
			spans = append(spans, s)
		}
	}
	slices.SortStableFunc(spans, func(a, b Span) int { return a.StartTime.Compare(b.StartTime) })
	return traceID, spans
}

// idKeys are the OTLP/JSON fields whose bytes are hex, not base64 (the
// OTLP specification's exception to the protobuf JSON mapping).
var idKeys = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// hexIDs rewrites an OTLP/JSON body's hex trace and span ids as the base64
// protojson reads.
func hexIDs(body []byte) ([]byte, error) {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && idKeys[k] {
					if b, err := hex.DecodeString(s); err == nil {
						x[k] = base64.StdEncoding.EncodeToString(b)
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return json.Marshal(doc)
}
