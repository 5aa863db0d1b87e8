// Package devstack runs the bundle on one machine the way AWS would: an API
// Gateway (HTTP API, payload v2) in front of the enqueue function, an event
// source mapping per worker queue, and a view of the mail going out. The
// functions themselves run as their real bootstrap binaries under the Lambda
// Runtime Interface Emulator, behind the Invoker port. The gateway adds only
// what API Gateway adds: it routes the API's routes, verifies the caller
// (SigV4, or X-Caller) into the event's requestContext, and passes a trace
// header; the enqueue function serves the event through its net/http
// handler, as it does on AWS.
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/obs"
)

// Invoker invokes one function with an event and returns its response
// payload.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// invoke encodes ev as fn's event and invokes fn with it: fn's raw
// response, or why there is none.
func invoke(ctx context.Context, fn Invoker, ev any) ([]byte, error) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return fn.Invoke(ctx, payload)
}

// LocalAccount is the account id the local stack uses (moto's default).
const LocalAccount = "123456789012"

// CallerHeader names the caller in local requests, standing in for the IAM
// signature API Gateway verifies; DefaultCaller is used without it.
const (
	CallerHeader  = "X-Caller"
	DefaultCaller = "local-user"
)

// maxBody is API Gateway's payload limit for an HTTP API (10 MB); the
// function applies its own, smaller one.
const maxBody = 10 << 20

// route is one HTTP API route.
type route struct {
	method, prefix, param string
}

// Gateway serves HTTP like API Gateway's HTTP API with IAM auth: it turns a
// request into a payload v2 event, invokes the function and writes its
// response.
type Gateway struct {
	fn     Invoker
	routes []route
}

// NewGateway returns the gateway of the runstwice API in front of fn: the
// routes of the API's handler (enqueue.Routes, which template.yaml
// declares too), each a method and a path with at most one path parameter,
// its last segment.
func NewGateway(fn Invoker) *Gateway {
	g := &Gateway{fn: fn}
	for _, key := range enqueue.Routes() {
		method, path, _ := strings.Cut(key, " ")
		rt := route{method: method, prefix: path}
		if i := strings.IndexByte(path, '{'); i >= 0 {
			rt.prefix, rt.param = path[:i], strings.Trim(path[i:], "{}")
		}
		g.routes = append(g.routes, rt)
	}
	return g
}

func (g *Gateway) match(r *http.Request) (route, string, bool) {
	for _, rt := range g.routes {
		if r.Method != rt.method || !strings.HasPrefix(r.URL.Path, rt.prefix) {
			continue
		}
		if rt.param == "" { // a route without a path parameter: the path itself
			if r.URL.Path == rt.prefix {
				return rt, "", true
			}
			continue
		}
		v := strings.TrimPrefix(r.URL.Path, rt.prefix)
		if v != "" && !strings.Contains(v, "/") {
			return rt, v, true
		}
	}
	return route{}, "", false
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, param, ok := g.match(r)
	if !ok {
		// What API Gateway answers for a route it does not have.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = io.WriteString(w, `{"message":"Request Entity Too Large"}`)
		return
	}
	iam, ok := authorize(w, r, body)
	if !ok {
		return
	}
	ev := g.event(r, rt, param, body, iam)
	payload, err := invoke(r.Context(), g.fn, ev)
	var resp events.APIGatewayV2HTTPResponse
	if err == nil {
		err = json.Unmarshal(payload, &resp)
	}
	if err != nil || resp.StatusCode == 0 {
		// API Gateway's answer when the integration fails.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"message":"Internal Server Error"}`)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	out := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// event builds the payload v2 event API Gateway would send.
func (g *Gateway) event(r *http.Request, rt route, param string, body []byte, iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	delete(headers, strings.ToLower(CallerHeader))
	now := time.Now()
	// Like API Gateway, the request carries an X-Ray trace header to the
	// function: the caller's, or a new trace.
	if obs.TraceRoot(headers[traceHeader]) == "" {
		headers[traceHeader] = newTraceHeader(now)
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	routeKey := rt.method + " " + rt.prefix + "{" + rt.param + "}"
	var params map[string]string
	if rt.param == "" {
		routeKey = rt.method + " " + rt.prefix
	} else {
		params = map[string]string{rt.param: param}
	}
	// Like API Gateway, repeated query parameters are joined with commas.
	var query map[string]string
	for k, vs := range r.URL.Query() {
		if query == nil {
			query = map[string]string{}
		}
		query[k] = strings.Join(vs, ",")
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.Path,
		RawQueryString:        r.URL.RawQuery,
		Headers:               headers,
		PathParameters:        params,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID:  LocalAccount,
			APIID:      "local",
			Stage:      "$default",
			RequestID:  uuid.NewString(),
			DomainName: r.Host,
			RouteKey:   routeKey,
			Time:       now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:  now.UnixMilli(),
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: iam},
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent()},
		},
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return ev
}

// traceHeader is the header that carries an X-Ray trace (lower-cased, as
// API Gateway passes headers on).
const traceHeader = "x-amzn-trace-id"

// newTraceHeader starts a trace: Root=1-<epoch seconds, 8 hex>-<96 random
// bits, 24 hex>, as X-Ray formats trace ids.
func newTraceHeader(now time.Time) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return fmt.Sprintf("Root=1-%08x-%s;Sampled=1", now.Unix(), hex.EncodeToString(b))
}
