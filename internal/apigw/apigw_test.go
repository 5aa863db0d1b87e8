package apigw_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/apigw"
)

// seen is what a handler saw of a request.
type seen struct {
	method, path, rawPath, query, param string
	header                              http.Header
	body                                string
	bodyErr                             error
	caller                              string
	badPath                             bool
}

// see serves ev to a handler on a mux with pattern and returns what the
// handler saw.
func see(t *testing.T, pattern string, ev events.APIGatewayV2HTTPRequest) seen {
	t.Helper()
	var s seen
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		rc, _ := apigw.RequestContext(r.Context())
		caller := ""
		if rc.Authorizer != nil && rc.Authorizer.IAM != nil {
			caller = rc.Authorizer.IAM.UserARN
		}
		s = seen{method: r.Method, path: r.URL.Path, rawPath: r.URL.EscapedPath(), query: r.URL.RawQuery, param: apigw.PathValue(r, "id"),
			header: r.Header, body: string(b), bodyErr: err, caller: caller, badPath: apigw.BadPath(r)}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s = seen{path: "404 " + r.URL.Path, badPath: apigw.BadPath(r)}
	})
	if _, err := apigw.Handler(mux)(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return s
}

func event(method, rawPath string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: rawPath, Headers: map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: rawPath}},
	}
}

// An event reaches the handler as API Gateway meant it.
func TestRequestIsTheEvent(t *testing.T) {
	t.Run("a header keeps its commas", func(t *testing.T) {
		ev := event("POST", "/x/1")
		ev.Headers = map[string]string{"idempotency-key": "a,b", "x-multi": "1, 2", "X-Case": "upper", "x-case": "lower"}
		s := see(t, "POST /x/{id}", ev)
		if v := s.header.Values("Idempotency-Key"); len(v) != 1 || v[0] != "a,b" {
			t.Errorf("Idempotency-Key %q; want one value, a,b", v)
		}
		if v := s.header.Values("X-Multi"); len(v) != 1 || v[0] != "1, 2" {
			t.Errorf("X-Multi %q; want one value", v)
		}
		if v := s.header.Get("X-Case"); v != "lower" {
			t.Errorf("X-Case %q; want the lower-case name's value, API Gateway's", v)
		}
	})
	t.Run("the query is API Gateway's parse", func(t *testing.T) {
		ev := event("GET", "/x/1")
		ev.RawQueryString = "state=a;b&limit=1&limit=2"
		ev.QueryStringParameters = map[string]string{"state": "a;b", "limit": "1,2"}
		s := see(t, "GET /x/{id}", ev)
		if s.query != "limit=1%2C2&state=a%3Bb" {
			t.Errorf("query %q", s.query)
		}
	})
	t.Run("a stage in the path", func(t *testing.T) {
		ev := event("GET", "/prod/x/1")
		ev.RequestContext.Stage = "prod"
		if s := see(t, "GET /x/{id}", ev); s.param != "1" || s.path != "/x/1" {
			t.Errorf("saw %+v", s)
		}
		ev = event("GET", "/production/x/1")
		ev.RequestContext.Stage = "prod"
		if s := see(t, "GET /x/{id}", ev); s.path != "404 /production/x/1" {
			t.Errorf("a path that only starts like the stage: %+v", s)
		}
	})
	t.Run("pathParameters win", func(t *testing.T) {
		ev := event("GET", "/x/a%2541")
		ev.PathParameters = map[string]string{"id": "a%41"}
		if s := see(t, "GET /x/{id}", ev); s.param != "a%41" || s.rawPath != "/x/a%2541" {
			t.Errorf("saw %+v", s)
		}
	})
	t.Run("a path that does not decode", func(t *testing.T) {
		if s := see(t, "GET /x/{id}", event("GET", "/x/%zz")); !s.badPath {
			t.Errorf("saw %+v; want a bad path", s)
		}
		if s := see(t, "GET /x/{id}", event("GET", "/x/%41")); s.badPath || s.param != "A" {
			t.Errorf("saw %+v", s)
		}
	})
	t.Run("a hand-written event", func(t *testing.T) {
		ev := events.APIGatewayV2HTTPRequest{RouteKey: "post /x/{id}", RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Path: "x/7"}}}
		if s := see(t, "POST /x/{id}", ev); s.method != "POST" || s.param != "7" {
			t.Errorf("saw %+v", s)
		}
	})
	t.Run("the caller", func(t *testing.T) {
		ev := event("GET", "/x/1")
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/alice"},
		}
		if s := see(t, "GET /x/{id}", ev); s.caller != "arn:aws:iam::123456789012:user/alice" {
			t.Errorf("saw %+v", s)
		}
	})
	t.Run("a base64 body", func(t *testing.T) {
		ev := event("POST", "/x/1")
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte("\xff{}")), true
		if s := see(t, "POST /x/{id}", ev); s.body != "\xff{}" || s.bodyErr != nil {
			t.Errorf("saw %+v", s)
		}
		ev.Body = "!!!"
		if s := see(t, "POST /x/{id}", ev); !errors.Is(s.bodyErr, apigw.ErrBase64) {
			t.Errorf("saw %+v; want ErrBase64", s)
		}
	})
}

// The response is what the handler wrote, and nothing else.
func TestResponseIsWhatWasWritten(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		want  events.APIGatewayV2HTTPResponse
	}{
		{"headers and a status", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Add("Vary", "a")
			w.Header().Add("Vary", "b")
			w.WriteHeader(http.StatusConflict)
			w.WriteHeader(http.StatusOK) // the first status counts
			_, _ = io.WriteString(w, `{"status":409}`)
		}, events.APIGatewayV2HTTPResponse{StatusCode: 409, Headers: map[string]string{"Content-Type": "application/problem+json", "Vary": "a,b"}, Body: `{"status":409}`}},
		{"no status, no content type", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "hi") },
			events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{}, Body: "hi"}},
		{"nothing", func(http.ResponseWriter) {}, events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{}}},
		{"bytes", func(w http.ResponseWriter) { _, _ = w.Write([]byte{0xff, 0}) },
			events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{}, Body: "/wA=", IsBase64Encoded: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := apigw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.write(w) }))(context.Background(), event("GET", "/"))
			if err != nil || got.StatusCode != tc.want.StatusCode || got.Body != tc.want.Body || got.IsBase64Encoded != tc.want.IsBase64Encoded || len(got.Headers) != len(tc.want.Headers) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			for k, v := range tc.want.Headers {
				if got.Headers[k] != v {
					t.Fatalf("header %s %q; want %q", k, got.Headers[k], v)
				}
			}
		})
	}
}

// A caller that serves a handler under net/http says who is calling with
// WithRequestContext.
func TestWithRequestContext(t *testing.T) {
	rc := events.APIGatewayV2HTTPRequestContext{AccountID: "123456789012"}
	if got, ok := apigw.RequestContext(apigw.WithRequestContext(context.Background(), rc)); !ok || got.AccountID != rc.AccountID {
		t.Fatalf("got %+v, %v", got, ok)
	}
	if _, ok := apigw.RequestContext(context.Background()); ok {
		t.Fatal("a context without one has a requestContext")
	}
}
