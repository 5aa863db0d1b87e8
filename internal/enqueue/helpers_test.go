package enqueue_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/enqueue"
)

const (
	alice = "arn:aws:iam::123456789012:user/alice"
	bob   = "arn:aws:iam::123456789012:user/bob"
)

// reqOpt changes a test request.
type reqOpt func(*events.APIGatewayV2HTTPRequest)

func asCaller(arn string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) {
		r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn},
		}
	}
}

func withHeader(name, value string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) { r.Headers[strings.ToLower(name)] = value }
}

func withoutHeader(name string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) { delete(r.Headers, strings.ToLower(name)) }
}

func base64Body(r *events.APIGatewayV2HTTPRequest) {
	r.Body = base64.StdEncoding.EncodeToString([]byte(r.Body))
	r.IsBase64Encoded = true
}

func request(method, path, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	r := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, Body: body,
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}
	asCaller(alice)(&r)
	for _, o := range opts {
		o(&r)
	}
	return r
}

// post is a POST /v1/jobs/{type} with an Idempotency-Key.
func post(typ, key, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	return request(http.MethodPost, "/v1/jobs/"+typ, body, append([]reqOpt{withHeader("Idempotency-Key", key)}, opts...)...)
}

// postBatch is a POST /v1/batches under Idempotency-Key key.
func postBatch(key, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	return request(http.MethodPost, "/v1/batches", body, append([]reqOpt{withHeader("Idempotency-Key", key)}, opts...)...)
}

func get(jobID string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	return request(http.MethodGet, "/v1/jobs/"+jobID, "", opts...)
}

// acceptedBody is the JSON of a 200/202 enqueue answer.
type acceptedBody struct {
	JobID         string `json:"jobId"`
	Type          string `json:"type"`
	State         string `json:"state"`
	Key           string `json:"key"`
	Deduplicated  bool   `json:"deduplicated"`
	CorrelationID string `json:"correlationId"`
}

func decodeAccepted(t testing.TB, resp events.APIGatewayV2HTTPResponse) acceptedBody {
	t.Helper()
	if resp.Headers["Content-Type"] != enqueue.ContentTypeJSON {
		t.Fatalf("content type %q; body %s", resp.Headers["Content-Type"], resp.Body)
	}
	var b acceptedBody
	if err := json.Unmarshal([]byte(resp.Body), &b); err != nil {
		t.Fatalf("body %s: %v", resp.Body, err)
	}
	return b
}

// checkProblem asserts resp is an RFC 9457 problem with the given status.
func checkProblem(t testing.TB, resp events.APIGatewayV2HTTPResponse, status int) enqueue.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d; want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if ct := resp.Headers["Content-Type"]; ct != enqueue.ContentTypeProblem {
		t.Fatalf("content type %q; want %s", ct, enqueue.ContentTypeProblem)
	}
	var p enqueue.Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
		t.Fatalf("problem body %s: %v", resp.Body, err)
	}
	if !strings.HasPrefix(p.Type, enqueue.ProblemTypePrefix) || p.Title == "" || p.Status != status || p.Detail == "" {
		t.Fatalf("incomplete problem: %s", resp.Body)
	}
	return p
}

func mustBody(t testing.TB, resp events.APIGatewayV2HTTPResponse, status int) acceptedBody {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d; want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	return decodeAccepted(t, resp)
}

const (
	welcome    = "email.welcome.v1"
	verify     = "email.partner-verification.v1"
	welcomeU1  = `{"args":{"userId":"u-1"}}`
	verifyBody = `{"args":{"userId":"u-123","roleCode":"city-partner","countryCode":"BD"}}`
)

// malformed is one request the API must refuse with a 4xx problem.
type malformed struct {
	name   string
	req    events.APIGatewayV2HTTPRequest
	status int
}

// malformedCatalog lists bad requests of every kind: each must be answered
// with the given 4xx problem+json, never a 5xx, and nothing stored.
func malformedCatalog() []malformed {
	ok := "key-ok-1"
	return []malformed{
		{"missing Idempotency-Key", request(http.MethodPost, "/v1/jobs/"+welcome, welcomeU1), 400},
		{"blank Idempotency-Key", post(welcome, "   ", welcomeU1), 400},
		{"oversized Idempotency-Key", post(welcome, strings.Repeat("k", 256), welcomeU1), 400},
		{"control char in key", post(welcome, "a\x01b", welcomeU1), 400},
		{"non-ASCII key", post(welcome, "schlüssel", welcomeU1), 400},
		{"unterminated quoted key", post(welcome, `"abc`, welcomeU1), 400},
		{"bad JSON", post(welcome, ok, `{"args":`), 400},
		{"e-mail address as the natural key", post(welcome, ok, `{"args":{"userId":"u-1"},"key":"bob@example.com"}`), 400},
		{"array body", post(welcome, ok, `[{"args":{"userId":"u-1"}}]`), 400},
		{"string body", post(welcome, ok, `"hello"`), 400},
		{"null body", post(welcome, ok, `null`), 400},
		{"empty body", post(welcome, ok, ``), 400},
		{"two JSON objects", post(welcome, ok, `{"args":{"userId":"u-1"}} {}`), 400},
		{"invalid UTF-8", post(welcome, ok, "{\"args\":{\"userId\":\"u-\xff\"}}"), 400},
		{"wrong content type", post(welcome, ok, welcomeU1, withHeader("Content-Type", "text/plain")), 415},
		{"missing content type", post(welcome, ok, welcomeU1, withoutHeader("Content-Type")), 415},
		{"form content type", post(welcome, ok, "userId=u-1", withHeader("Content-Type", "application/x-www-form-urlencoded")), 415},
		{"latin-1 charset", post(welcome, ok, welcomeU1, withHeader("Content-Type", "application/json; charset=latin1")), 415},
		{"unknown type", post("email.welcom.v1", ok, welcomeU1), 404},
		{"unversioned type", post("email.welcome", ok, welcomeU1), 404},
		{"unknown field", post(welcome, ok, `{"args":{"userId":"u-1"},"priority":"high"}`), 400},
		{"unknown arg", post(welcome, ok, `{"args":{"userId":"u-1","isAdmin":"yes"}}`), 400},
		{"missing arg", post(verify, ok, `{"args":{"userId":"u-1","roleCode":"city-partner"}}`), 400},
		{"missing args", post(welcome, ok, `{"key":"welcome:u-1"}`), 400},
		{"args a string", post(welcome, ok, `{"args":"u-1"}`), 400},
		{"nested arg", post(welcome, ok, `{"args":{"userId":{"id":"u-1"}}}`), 400},
		{"array arg", post(welcome, ok, `{"args":{"userId":["u-1"]}}`), 400},
		{"number arg", post(welcome, ok, `{"args":{"userId":123}}`), 400},
		{"null arg", post(welcome, ok, `{"args":{"userId":null}}`), 400},
		{"e-mail address arg", post(welcome, ok, `{"args":{"userId":"alice@example.com"}}`), 400},
		{"URL arg", post(welcome, ok, `{"args":{"userId":"https://evil.example/u-1"}}`), 400},
		{"free text arg", post(welcome, ok, `{"args":{"userId":"Alice Smith"}}`), 400},
		{"oversized arg", post(welcome, ok, `{"args":{"userId":"`+strings.Repeat("u", 65)+`"}}`), 400},
		{"bad country", post(verify, ok, `{"args":{"userId":"u-1","roleCode":"city-partner","countryCode":"Bangladesh"}}`), 400},
		{"bad key field", post(welcome, ok, `{"args":{"userId":"u-1"},"key":"has space"}`), 400},
		{"key field a number", post(welcome, ok, `{"args":{"userId":"u-1"},"key":7}`), 400},
		{"bad policy", post(welcome, ok, `{"args":{"userId":"u-1"},"duplicatePolicy":"Sometimes"}`), 400},
		{"policy a number", post(welcome, ok, `{"args":{"userId":"u-1"},"duplicatePolicy":1}`), 400},
		{"after not a job id", post(welcome, ok, `{"args":{"userId":"u-1"},"after":"job-1"}`), 400},
		{"after a number", post(welcome, ok, `{"args":{"userId":"u-1"},"after":7}`), 400},
		{"after a batch index", post(welcome, ok, `{"args":{"userId":"u-1"},"after":"#0"}`), 400},
		{"after with runAt", post(welcome, ok, `{"args":{"userId":"u-1"},"after":"5f6b7c1e-8d4e-4a3b-9c2d-1e0f9a8b7c6d","runAt":"2030-01-01T00:00:00Z"}`), 400},
		{"after with delaySeconds", post(welcome, ok, `{"args":{"userId":"u-1"},"after":"5f6b7c1e-8d4e-4a3b-9c2d-1e0f9a8b7c6d","delaySeconds":5}`), 400},
		{"afterPolicy without after", post(welcome, ok, `{"args":{"userId":"u-1"},"afterPolicy":"OnAnyEnd"}`), 400},
		{"unknown afterPolicy", post(welcome, ok, `{"args":{"userId":"u-1"},"after":"5f6b7c1e-8d4e-4a3b-9c2d-1e0f9a8b7c6d","afterPolicy":"OnMonday"}`), 400},
		{"negative delay", post(welcome, ok, `{"args":{"userId":"u-1"},"delaySeconds":-1}`), 400},
		{"delay too long", post(welcome, ok, `{"args":{"userId":"u-1"},"delaySeconds":901}`), 400},
		{"fractional delay", post(welcome, ok, `{"args":{"userId":"u-1"},"delaySeconds":1.5}`), 400},
		{"delay a string", post(welcome, ok, `{"args":{"userId":"u-1"},"delaySeconds":"5"}`), 400},
		{"runAt with delaySeconds", post(welcome, ok, `{"args":{"userId":"u-1"},"runAt":"2026-12-03T09:00:00Z","delaySeconds":60}`), 400},
		{"runAt years ahead", post(welcome, ok, `{"args":{"userId":"u-1"},"runAt":"2099-01-01T00:00:00Z"}`), 400},
		{"runAt without offset", post(welcome, ok, `{"args":{"userId":"u-1"},"runAt":"2026-12-03 09:00"}`), 400},
		{"20 KiB body", post(welcome, ok, `{"args":{"userId":"u-1"},"key":"`+strings.Repeat("k", 20<<10)+`"}`), 413},
		{"20 KiB base64 body", post(welcome, ok, `{"args":{"userId":"u-1"},"key":"`+strings.Repeat("k", 20<<10)+`"}`, base64Body), 413},
		{"bad base64 body", post(welcome, ok, "!!!", func(r *events.APIGatewayV2HTTPRequest) { r.IsBase64Encoded = true }), 400},
		{"bad X-Correlation-Id", post(welcome, ok, welcomeU1, withHeader("X-Correlation-Id", "has space")), 400},
		{"no caller", post(welcome, ok, welcomeU1, func(r *events.APIGatewayV2HTTPRequest) { r.RequestContext.Authorizer = nil }), 401},
		{"empty IAM caller", post(welcome, ok, welcomeU1, asCaller("")), 401},
		{"bad jobId on GET", get("not-a-uuid"), 400},
		{"upper-case jobId on GET", get("6F0C1C8E-3A4B-5D2E-9F10-2B7A1E5C4D33"), 400},
		{"unknown job on GET", get("6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33"), 404},
		{"PUT", request(http.MethodPut, "/v1/jobs/"+welcome, ""), 405},
		{"DELETE of a non-id", request(http.MethodDelete, "/v1/jobs/"+welcome, ""), 400},
		{"unknown path", request(http.MethodGet, "/v2/things", ""), 404},
		{"nested path", request(http.MethodPost, "/v1/jobs/"+welcome+"/extra", welcomeU1), 404},
	}
}
