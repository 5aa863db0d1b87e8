package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/obs"
)

// fnFunc is an in-process Invoker.
type fnFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f fnFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) { return f(ctx, payload) }

func TestGatewayBuildsPayloadV2AndWritesTheResponse(t *testing.T) {
	var got events.APIGatewayV2HTTPRequest
	gw := NewGateway(fnFunc(func(_ context.Context, p []byte) ([]byte, error) {
		if err := json.Unmarshal(p, &got); err != nil {
			return nil, err
		}
		return json.Marshal(events.APIGatewayV2HTTPResponse{
			StatusCode: 202, Headers: map[string]string{"Content-Type": "application/json", "Location": "/v1/jobs/x"}, Body: `{"jobId":"x"}`,
		})
	}))
	srv := httptest.NewServer(gw)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs/email.welcome.v1?x=1", strings.NewReader(`{"args":{}}`))
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("X-Caller", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 202 || resp.Header.Get("Location") != "/v1/jobs/x" || string(body) != `{"jobId":"x"}` {
		t.Fatalf("response %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if got.Version != "2.0" || got.RouteKey != "POST /v1/jobs/{type}" || got.PathParameters["type"] != "email.welcome.v1" ||
		got.Headers["idempotency-key"] != "k1" || got.Body != `{"args":{}}` || got.RawQueryString != "x=1" ||
		got.RequestContext.HTTP.Method != "POST" || got.RequestContext.Authorizer.IAM.UserARN != "arn:aws:iam::123456789012:user/alice" {
		t.Fatalf("event %+v", got)
	}
	if _, leaked := got.Headers["x-caller"]; leaked {
		t.Fatal("the X-Caller stand-in leaked into the headers")
	}
}

func TestGatewayDefaultCallerAndRoutes(t *testing.T) {
	var caller string
	gw := NewGateway(fnFunc(func(_ context.Context, p []byte) ([]byte, error) {
		var ev events.APIGatewayV2HTTPRequest
		_ = json.Unmarshal(p, &ev)
		caller = ev.RequestContext.Authorizer.IAM.UserARN
		return []byte(`{"statusCode":200,"body":"{}"}`), nil
	}))
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/jobs/abc", 200},
		{"GET", "/v1/jobs/", 404},
		{"GET", "/v1/jobs/a/b", 404},
		{"DELETE", "/v1/jobs/abc", 200},
		{"PUT", "/v1/jobs/abc", 404},
		{"GET", "/", 404},
	} {
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s %s = %d; want %d", tc.method, tc.path, rec.Code, tc.status)
		}
	}
	if !strings.HasSuffix(caller, ":user/"+DefaultCaller) {
		t.Fatalf("caller %q; want the default local-user", caller)
	}
}

func TestGatewayFunctionErrorIs500LikeAPIGateway(t *testing.T) {
	for name, fn := range map[string]fnFunc{
		"invoke error": func(context.Context, []byte) ([]byte, error) { return nil, errors.New("crash") },
		"not a response": func(context.Context, []byte) ([]byte, error) {
			return []byte(`{"errorMessage":"panic"}`), nil
		},
	} {
		rec := httptest.NewRecorder()
		NewGateway(fn).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/jobs/abc", nil))
		if rec.Code != 500 || !strings.Contains(rec.Body.String(), "Internal Server Error") {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
}

// Like API Gateway, the gateway hands the function an X-Ray trace header:
// the caller's, or a new trace.
func TestGatewayCarriesATraceHeader(t *testing.T) {
	var got events.APIGatewayV2HTTPRequest
	gw := NewGateway(fnFunc(func(_ context.Context, p []byte) ([]byte, error) {
		if err := json.Unmarshal(p, &got); err != nil {
			return nil, err
		}
		return json.Marshal(events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "{}"})
	}))
	srv := httptest.NewServer(gw)
	defer srv.Close()
	const given = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
	for _, header := range []string{"", given} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/jobs/x", nil)
		if header != "" {
			req.Header.Set("X-Amzn-Trace-Id", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		trace := got.Headers["x-amzn-trace-id"]
		if obs.TraceRoot(trace) == "" || (header != "" && trace != header) {
			t.Fatalf("with %q the function got trace header %q", header, trace)
		}
	}
}
