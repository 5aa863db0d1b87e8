// Package apigw serves a net/http handler on AWS Lambda behind an API
// Gateway HTTP API (payload format 2.0): Handler turns each event into an
// *http.Request, runs the handler, and turns what it wrote into the
// function's response. It is the bundle's own, not a proxy library's, so
// that an event reaches the handler as API Gateway meant it (docs/
// architecture.md, "The API on net/http"):
//
//   - a header keeps its value whole: API Gateway joins a repeated header
//     with commas, and an Idempotency-Key may hold a comma itself, so the
//     value is never split again;
//   - the query is API Gateway's own parse of it (queryStringParameters, a
//     repeated name's values joined with commas), never rawQueryString
//     parsed again by Go, which drops what it cannot parse;
//   - a path under a named stage (/<stage>/…) is routed without the stage;
//     PathValue prefers API Gateway's pathParameters to the segment the
//     handler's mux matched;
//   - the request's context carries the event's requestContext (the
//     caller's identity, RequestContext) and the Lambda invocation's
//     context;
//   - a body API Gateway sent base64-encoded is decoded; one that is not
//     valid base64 fails its first Read with ErrBase64;
//   - the response is sent as written: each header once (several values
//     joined with commas), the body as text, base64 only when it is not
//     UTF-8. Nothing is added: no sniffed Content-Type, no Date.
package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// ErrBase64 is what a Read of the body returns when API Gateway marked it
// base64 and it is not.
var ErrBase64 = errors.New("apigw: the body is marked base64 and is not valid base64")

// Handler returns the Lambda handler that serves h to API Gateway. It
// never returns an error: whatever h writes is the response.
func Handler(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		rec := NewRecorder()
		h.ServeHTTP(rec, Request(ctx, ev))
		return rec.Response(), nil
	}
}

// eventKey carries the event's parts the handler may ask for.
type eventKey struct{}

// event is what a request made by Request remembers of its event.
type event struct {
	rc      events.APIGatewayV2HTTPRequestContext
	params  map[string]string
	badPath bool
}

// Request is the *http.Request of API Gateway's event ev, its context ctx
// with the event's requestContext in it.
func Request(ctx context.Context, ev events.APIGatewayV2HTTPRequest) *http.Request {
	method := ev.RequestContext.HTTP.Method
	if method == "" { // a hand-written event may carry only the route key
		method, _, _ = strings.Cut(ev.RouteKey, " ")
	}
	raw := ev.RawPath
	if raw == "" {
		raw = ev.RequestContext.HTTP.Path
	}
	if !strings.HasPrefix(raw, "/") {
		raw = "/" + raw
	}
	if st := ev.RequestContext.Stage; st != "" {
		if rest, ok := strings.CutPrefix(raw, "/"+st); ok && strings.HasPrefix(rest, "/") {
			raw = rest
		}
	}
	u := &url.URL{Path: raw, RawPath: raw, RawQuery: query(ev.QueryStringParameters)}
	path, err := url.PathUnescape(raw)
	if err == nil {
		u.Path = path
	}
	info := &event{rc: ev.RequestContext, params: ev.PathParameters, badPath: err != nil}
	r := &http.Request{
		Method:     strings.ToUpper(method),
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header(ev.Headers),
		Host:       ev.RequestContext.DomainName,
		RemoteAddr: ev.RequestContext.HTTP.SourceIP,
		RequestURI: u.RequestURI(),
	}
	r.Body, r.ContentLength = body(ev)
	return r.WithContext(context.WithValue(ctx, eventKey{}, info))
}

// header is the request header of the event's headers, each value whole. A
// name given twice in different cases keeps its lower-case form's value,
// the one API Gateway sends.
func header(in map[string]string) http.Header {
	h := make(http.Header, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		ck := http.CanonicalHeaderKey(k)
		if _, seen := h[ck]; seen && k != strings.ToLower(k) {
			continue
		}
		h[ck] = []string{in[k]}
	}
	return h
}

// query is the raw query of API Gateway's parsed parameters, names sorted.
func query(params map[string]string) string {
	if len(params) == 0 {
		return ""
	}
	v := make(url.Values, len(params))
	for k, p := range params {
		v.Set(k, p)
	}
	return v.Encode()
}

// body is the request body of ev and its length (-1 when unknown).
func body(ev events.APIGatewayV2HTTPRequest) (io.ReadCloser, int64) {
	if !ev.IsBase64Encoded {
		return io.NopCloser(strings.NewReader(ev.Body)), int64(len(ev.Body))
	}
	b, err := base64.StdEncoding.DecodeString(ev.Body)
	if err != nil {
		return io.NopCloser(errReader{ErrBase64}), -1
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func eventOf(ctx context.Context) (*event, bool) {
	e, ok := ctx.Value(eventKey{}).(*event)
	return e, ok
}

// WithRequestContext returns ctx carrying rc as an API Gateway request's
// requestContext: how a caller that serves the handler under net/http
// itself (a test, a local gateway) says who is calling.
func WithRequestContext(ctx context.Context, rc events.APIGatewayV2HTTPRequestContext) context.Context {
	return context.WithValue(ctx, eventKey{}, &event{rc: rc})
}

// RequestContext returns the requestContext of the request whose context
// ctx is: API Gateway's (Request), or one WithRequestContext set.
func RequestContext(ctx context.Context) (events.APIGatewayV2HTTPRequestContext, bool) {
	e, ok := eventOf(ctx)
	if !ok {
		return events.APIGatewayV2HTTPRequestContext{}, false
	}
	return e.rc, true
}

// PathValue is the path parameter name of r: API Gateway's pathParameters
// value when the event has one, else what r's mux matched.
func PathValue(r *http.Request, name string) string {
	if e, ok := eventOf(r.Context()); ok && e.params[name] != "" {
		return e.params[name]
	}
	return r.PathValue(name)
}

// BadPath reports whether r came from an event whose path is not a valid
// escaped path (a "%" not followed by two hex digits): it names no route.
func BadPath(r *http.Request) bool {
	e, ok := eventOf(r.Context())
	return ok && e.badPath
}

// Recorder is the http.ResponseWriter Handler runs a handler with: it
// keeps the status, the header and the body.
type Recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{header: http.Header{}} }

// Header implements http.ResponseWriter.
func (r *Recorder) Header() http.Header { return r.header }

// WriteHeader implements http.ResponseWriter: the first status counts.
func (r *Recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// Write implements http.ResponseWriter.
func (r *Recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// Status is the status written (200 when none was).
func (r *Recorder) Status() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Body is the body written.
func (r *Recorder) Body() []byte { return r.body.Bytes() }

// Response is what was written as API Gateway's response.
func (r *Recorder) Response() events.APIGatewayV2HTTPResponse {
	h := make(map[string]string, len(r.header))
	for k, vs := range r.header {
		h[k] = strings.Join(vs, ",")
	}
	resp := events.APIGatewayV2HTTPResponse{StatusCode: r.Status(), Headers: h}
	if b := r.body.Bytes(); utf8.Valid(b) {
		resp.Body = string(b)
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return resp
}
