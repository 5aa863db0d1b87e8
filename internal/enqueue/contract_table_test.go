package enqueue_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// contractStep is one request of the contract table: what happens in the
// world before it (nil: nothing), and the request as API Gateway sends it.
type contractStep struct {
	name   string
	before func(t testing.TB, w *world)
	req    events.APIGatewayV2HTTPRequest
	// gatewayOnly: a request only API Gateway's event can carry (a stage
	// in the path, a path that does not decode).
	gatewayOnly bool
}

// contractSteps is a table of requests, in order, on one world: every
// route and every problem of the API (§3 and §9), replays and refusals
// that depend on what the earlier steps made included.
func contractSteps() []contractStep {
	corr := func(i int) reqOpt { return withHeader("X-Correlation-Id", fmt.Sprintf("corr-%d", i)) }
	jobA := message.DeriveMessageID(alice, "k-a")
	later := time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC).Format(time.RFC3339)
	steps := []contractStep{
		{name: "new job", req: post(welcome, "k-a", welcomeU1, corr(1))},
		{name: "replay", req: post(welcome, "k-a", `{ "args" : { "userId" : "u-1" } }`, corr(2))},
		{name: "same key, another request", req: post(welcome, "k-a", `{"args":{"userId":"u-2"}}`, corr(3))},
		{name: "same key, another type", req: post(verify, "k-a", verifyBody, corr(4))},
		{name: "duplicate of an active job", req: post(welcome, "k-b", welcomeU1, corr(5))},
		{name: "partner verification", req: post(verify, "k-c", verifyBody, corr(6))},
		{name: "a job due in 90 minutes", req: post(welcome, "k-d", `{"args":{"userId":"u-4"},"runAt":"`+later+`"}`, corr(7))},
		{name: "a job with a delay", req: post(welcome, "k-e", `{"args":{"userId":"u-5"},"delaySeconds":60}`, corr(8))},
		{name: "a base64 body", req: post(welcome, "k-f", `{"args":{"userId":"u-6"}}`, corr(9), base64Body)},
		{name: "a quoted key", req: post(welcome, `"k-g, quoted"`, `{"args":{"userId":"u-7"}}`, corr(10))},
		{name: "replay of the quoted key", req: post(welcome, `"k-g, quoted"`, `{"args":{"userId":"u-7"}}`, corr(11))},
		{name: "GET", req: get(jobA, corr(12))},
		{name: "GET of another caller's job", req: get(jobA, asCaller(bob), corr(13))},
		{name: "GET of no job", req: get("6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33", corr(14))},
		{name: "list", req: request(http.MethodGet, "/v1/jobs", "", corr(15))},
		{name: "list filtered", req: request(http.MethodGet, "/v1/jobs", "", corr(16), query(map[string]string{"state": "Enqueued", "type": welcome, "limit": "2"}))},
		{name: "list's next page", req: request(http.MethodGet, "/v1/jobs", "", corr(17), query(map[string]string{"limit": "2", "cursor": alice + "|2"}))},
		{name: "list with bad filters", req: request(http.MethodGet, "/v1/jobs", "", corr(18), query(map[string]string{"state": "Done", "type": "email.welcom.v1", "limit": "0", "x": "1"}))},
		{name: "list with another caller's cursor", req: request(http.MethodGet, "/v1/jobs", "", corr(19), query(map[string]string{"cursor": bob + "|0"}))},
		{name: "another caller's list", req: request(http.MethodGet, "/v1/jobs", "", asCaller(bob), corr(20))},
		{name: "cancel", req: request(http.MethodDelete, "/v1/jobs/"+jobA, "", corr(21))},
		{name: "cancel again", req: request(http.MethodDelete, "/v1/jobs/"+jobA, "", corr(22))},
		{name: "cancel of another caller's job", req: request(http.MethodDelete, "/v1/jobs/"+jobA, "", asCaller(bob), corr(23))},
		{name: "a new job after the cancelled one", req: post(welcome, "k-h", `{"args":{"userId":"u-1"}}`, corr(24))},
		{
			name:   "cancel of a job that ran",
			before: func(_ testing.TB, w *world) { w.setState(message.DeriveMessageID(alice, "k-h"), jobs.StateSucceeded) },
			req:    request(http.MethodDelete, "/v1/jobs/"+message.DeriveMessageID(alice, "k-h"), "", corr(25)),
		},
		{name: "RejectAlways after it ran", req: post(welcome, "k-i", `{"args":{"userId":"u-1"},"duplicatePolicy":"RejectAlways"}`, corr(26))},
		{name: "replay of the rejection", req: post(welcome, "k-i", `{"args":{"userId":"u-1"},"duplicatePolicy":"RejectAlways"}`, corr(27))},
		{name: "AllowAfterFailed after it ran", req: post(welcome, "k-j", `{"args":{"userId":"u-1"}}`, corr(28))},
		{
			name: "in flight",
			before: func(t testing.TB, w *world) {
				if _, err := w.Begin(context.Background(), alice, "k-k", fingerprintOf(t, welcome, []byte(`{"args":{"userId":"u-8"}}`))); err != nil {
					t.Fatal(err)
				}
				w.advance(10 * time.Second)
			},
			req: post(welcome, "k-k", `{"args":{"userId":"u-8"}}`, corr(29)),
		},
		{name: "in flight, another request", req: post(welcome, "k-k", `{"args":{"userId":"u-9"}}`, corr(30))},
		{name: "taken over once its lock expired", before: func(_ testing.TB, w *world) { w.advance(21 * time.Second) }, req: post(welcome, "k-k", `{"args":{"userId":"u-8"}}`, corr(31))},
		{name: "a continuation of a job that ran", req: post(welcome, "k-l", `{"args":{"userId":"u-10"},"after":"`+message.DeriveMessageID(alice, "k-h")+`"}`, corr(32))},
		{name: "after another caller's job", req: post(welcome, "k-m", `{"args":{"userId":"u-11"},"after":"`+jobA+`"}`, asCaller(bob), corr(33))},
		{name: "a tick type", req: post("email.partner-digest-fanout.v1", "k-n", `{"args":{}}`, corr(34))},
		{name: "batches unconfigured", req: postBatch("k-o", `{"jobs":[{"type":"`+welcome+`","args":{"userId":"u-12"}}]}`, corr(35))},
		{name: "batch GET unconfigured", req: request(http.MethodGet, "/v1/batches/"+jobA, "", corr(36))},
		{name: "federated user", req: post(welcome, "k-p", welcomeU1, asCaller("arn:aws:sts::123456789012:federated-user/carol"), corr(37))},
		{name: "assumed role", req: post(welcome, "k-q", `{"args":{"userId":"u-13"}}`, asCaller("arn:aws:sts::123456789012:assumed-role/app/s-1"), corr(38))},
		{name: "assumed role, another session", req: post(welcome, "k-q", `{"args":{"userId":"u-13"}}`, asCaller("arn:aws:sts::123456789012:assumed-role/app/s-2"), corr(39))},
		{name: "HEAD", req: request(http.MethodHead, "/v1/jobs/"+jobA, "", corr(40))},
		{name: "OPTIONS", req: request(http.MethodOptions, "/v1/jobs/"+welcome, "", corr(41))},
		{name: "PUT on the list", req: request(http.MethodPut, "/v1/jobs", "", corr(42))},
		{name: "HEAD on the list", req: request(http.MethodHead, "/v1/jobs", "", corr(43))},
		{name: "GET on batches", req: request(http.MethodGet, "/v1/batches", "", corr(44))},
		{name: "DELETE of a batch", req: request(http.MethodDelete, "/v1/batches/"+jobA, "", corr(45))},
		{name: "a trailing slash", req: request(http.MethodGet, "/v1/jobs/", "", corr(46))},
		{name: "an escaped slash", req: request(http.MethodGet, "/v1/jobs/a%2Fb", "", corr(47))},
		{name: "an empty segment", req: request(http.MethodGet, "/v1//jobs/"+jobA, "", corr(48))},
		{name: "a dot-dot segment", req: request(http.MethodGet, "/v1/jobs/..", "", corr(49))},
		{name: "a dot segment in the path", req: request(http.MethodGet, "/v1/./jobs/"+jobA, "", corr(50))},
		{name: "an escaped job id", req: request(http.MethodGet, "/v1/jobs/"+strings.Replace(jobA, "-", "%2D", 1), "", corr(51))},
		{name: "the root", req: request(http.MethodGet, "/", "", corr(52))},
		{name: "a stage in the path", req: request(http.MethodGet, "/$default/v1/jobs/"+jobA, "", corr(53)), gatewayOnly: true},
		{name: "a path that does not decode", req: request(http.MethodGet, "/v1/jobs/%zz", "", corr(54)), gatewayOnly: true},
		{name: "a type that does not exist, escaped", req: post("a%20b", "k-r", welcomeU1, corr(55))},
		{name: "a comma in the key", req: post(welcome, "k,s", `{"args":{"userId":"u-14"}}`, corr(56))},
		{name: "replay of the comma key", req: post(welcome, "k,s", `{"args":{"userId":"u-14"}}`, corr(57))},
		{name: "a charset", req: post(welcome, "k-t", `{"args":{"userId":"u-15"}}`, corr(58), withHeader("Content-Type", "application/json; charset=UTF-8"))},
	}
	for i, m := range malformedCatalog() {
		if m.name != "bad X-Correlation-Id" {
			corr(100 + i)(&m.req)
		}
		// Only API Gateway's event can carry a body that is marked base64
		// and is not.
		steps = append(steps, contractStep{name: "malformed: " + m.name, req: m.req, gatewayOnly: m.name == "bad base64 body"})
	}
	return steps
}

// query sets the request's query parameters, as API Gateway parses them.
func query(params map[string]string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) {
		r.QueryStringParameters = params
		q := url.Values{}
		for k, v := range params {
			q.Set(k, v)
		}
		r.RawQueryString = q.Encode()
	}
}

// plainBody is the request body as it was sent.
func plainBody(t testing.TB, r events.APIGatewayV2HTTPRequest) string {
	t.Helper()
	if !r.IsBase64Encoded {
		return r.Body
	}
	b, err := base64.StdEncoding.DecodeString(r.Body)
	if err != nil {
		return "\x00not base64"
	}
	return string(b)
}
