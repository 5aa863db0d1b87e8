package enqueue_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/message"
)

func newHandler(w *world) *enqueue.Handler {
	return &enqueue.Handler{
		Registry: contract.Registry(), Idempotency: w, Jobs: w, List: w, Queue: w, Schedules: w,
		Logger: obs.NewLogger(io.Discard, "error"), Now: w.Now,
	}
}

func call(t testing.TB, h *enqueue.Handler, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned error %v", err)
	}
	return resp
}

func TestPostNewJob(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	resp := call(t, h, post(verify, "k-1", verifyBody, withHeader("X-Correlation-Id", "corr-1")))
	b := mustBody(t, resp, http.StatusAccepted)
	wantID := message.DeriveMessageID(alice, "k-1")
	if b.JobID != wantID || b.State != "Enqueued" || b.Deduplicated || b.CorrelationID != "corr-1" || b.Type != verify || b.Key != "partner-verification:u-123" {
		t.Fatalf("body %+v", b)
	}
	if resp.Headers["Location"] != "/v1/jobs/"+wantID || resp.Headers["X-Correlation-Id"] != "corr-1" {
		t.Fatalf("headers %v", resp.Headers)
	}
	msgs := w.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.Queue != string(contract.QueueCritical) || m.Type != verify || m.CorrelationID != "corr-1" || m.Delay != 0 {
		t.Fatalf("message %+v", m)
	}
	env, err := message.Decode([]byte(m.Body))
	if err != nil || env.MessageID != wantID || env.Args["countryCode"] != "BD" || env.Key != b.Key {
		t.Fatalf("envelope %+v, %v", env, err)
	}
	if j, _ := w.Get(context.Background(), wantID); j.State != jobs.StateEnqueued {
		t.Fatalf("job state %s", j.State)
	}
}

func TestPostGeneratesCorrelationID(t *testing.T) {
	w := newWorld()
	b := mustBody(t, call(t, newHandler(w), post(welcome, "k", welcomeU1)), http.StatusAccepted)
	if !message.ValidCorrelationID(b.CorrelationID) || w.messages()[0].CorrelationID != b.CorrelationID {
		t.Fatalf("correlation id %q", b.CorrelationID)
	}
}

func TestReplay(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	first := call(t, h, post(welcome, "k", welcomeU1))
	// Same request, reformatted, with another correlation id: a replay.
	again := call(t, h, post(welcome, "k", "{ \"args\" : { \"userId\" : \"u-1\" } }", withHeader("X-Correlation-Id", "other")))
	if again.StatusCode != first.StatusCode || again.Body != first.Body || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("replay %d %v %s; first %s", again.StatusCode, again.Headers, again.Body, first.Body)
	}
	if first.Headers["Idempotent-Replayed"] != "" {
		t.Fatal("first response marked replayed")
	}
	if n := len(w.messages()); n != 1 {
		t.Fatalf("%d messages; want 1", n)
	}
	// The quoted structured-field form names the same key.
	quoted := call(t, h, post(welcome, `"k"`, welcomeU1))
	if quoted.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("quoted key not replayed: %d %s", quoted.StatusCode, quoted.Body)
	}
}

func TestKeyReuseWithOtherRequest(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	mustBody(t, call(t, h, post(welcome, "k", welcomeU1)), http.StatusAccepted)
	checkProblem(t, call(t, h, post(welcome, "k", `{"args":{"userId":"u-2"}}`)), http.StatusUnprocessableEntity)
	checkProblem(t, call(t, h, post(verify, "k", verifyBody)), http.StatusUnprocessableEntity)
}

func TestInFlight(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	req := post(welcome, "k", welcomeU1)
	// Another instance holds the lock for this exact request.
	body := []byte(req.Body)
	fp := fingerprintOf(t, welcome, body)
	if _, err := w.Begin(context.Background(), alice, "k", fp); err != nil {
		t.Fatal(err)
	}
	resp := call(t, h, req)
	checkProblem(t, resp, http.StatusConflict)
	if ra := resp.Headers["Retry-After"]; ra != "30" {
		t.Fatalf("Retry-After %q; want 30", ra)
	}
	// Its lock expires (it crashed): the retry takes over.
	w.advance(31 * time.Second)
	mustBody(t, call(t, h, req), http.StatusAccepted)
}

func TestDedupActiveJob(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	first := mustBody(t, call(t, h, post(welcome, "k-1", welcomeU1)), http.StatusAccepted)
	for _, policy := range contract.Policies {
		body := `{"args":{"userId":"u-1"},"duplicatePolicy":"` + string(policy) + `"}`
		dup := mustBody(t, call(t, h, post(welcome, "k-"+string(policy), body)), http.StatusOK)
		if dup.JobID != first.JobID || !dup.Deduplicated {
			t.Fatalf("%s: %+v; want dedup of %s", policy, dup, first.JobID)
		}
	}
	if n := len(w.messages()); n != 1 {
		t.Fatalf("%d messages; want 1", n)
	}
}

func TestPolicyAfterTerminal(t *testing.T) {
	tests := []struct {
		prev   jobs.State
		policy contract.DuplicatePolicy
		want   int
	}{
		{jobs.StateFailed, contract.AllowAfterFailed, http.StatusAccepted},
		{jobs.StateFailed, contract.RejectIfFailed, http.StatusConflict},
		{jobs.StateSucceeded, contract.RejectIfFailed, http.StatusAccepted},
		{jobs.StateSucceeded, contract.RejectAlways, http.StatusConflict},
		{jobs.StateExpired, contract.RejectAlways, http.StatusConflict},
	}
	for _, tt := range tests {
		t.Run(string(tt.prev)+"/"+string(tt.policy), func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			first := mustBody(t, call(t, h, post(welcome, "k-1", welcomeU1)), http.StatusAccepted)
			w.setState(first.JobID, tt.prev)
			body := `{"args":{"userId":"u-1"},"duplicatePolicy":"` + string(tt.policy) + `"}`
			resp := call(t, h, post(welcome, "k-2", body))
			if tt.want == http.StatusConflict {
				p := checkProblem(t, resp, http.StatusConflict)
				if p.ExistingJobID != first.JobID || p.Policy != string(tt.policy) {
					t.Fatalf("problem %+v", p)
				}
				// The rejection is stored: a retry replays it.
				again := call(t, h, post(welcome, "k-2", body))
				if again.StatusCode != http.StatusConflict || again.Headers["Idempotent-Replayed"] != "true" {
					t.Fatalf("retry of rejection: %d %v", again.StatusCode, again.Headers)
				}
				return
			}
			b := mustBody(t, resp, tt.want)
			if b.JobID == first.JobID || b.Deduplicated {
				t.Fatalf("want a new job: %+v", b)
			}
		})
	}
}

func TestScheduled(t *testing.T) {
	w := newWorld()
	b := mustBody(t, call(t, newHandler(w), post(welcome, "k", `{"args":{"userId":"u-1"},"delaySeconds":900}`)), http.StatusAccepted)
	if b.State != "Scheduled" {
		t.Fatalf("state %s", b.State)
	}
	if d := w.messages()[0].Delay; d != 900*time.Second {
		t.Fatalf("delay %v", d)
	}
}

func TestExplicitKey(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	a := mustBody(t, call(t, h, post(welcome, "k-1", `{"args":{"userId":"u-1"},"key":"campaign-7:u-1"}`)), http.StatusAccepted)
	b := mustBody(t, call(t, h, post(welcome, "k-2", welcomeU1)), http.StatusAccepted)
	if a.Key != "campaign-7:u-1" || b.Key != "welcome:u-1" || a.JobID == b.JobID {
		t.Fatalf("explicit key job %+v, derived key job %+v", a, b)
	}
}

func TestSQSFailureLeavesKeyRetryable(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	w.sendErr = errQueueDown
	resp := call(t, h, post(welcome, "k", welcomeU1))
	checkProblem(t, resp, http.StatusServiceUnavailable)
	if resp.Headers["Retry-After"] == "" {
		t.Fatal("503 without Retry-After")
	}
	if j, err := w.Get(context.Background(), message.DeriveMessageID(alice, "k")); err != nil || j.State != jobs.StatePending {
		t.Fatalf("job after failed send: %+v, %v; want Pending (never Enqueued)", j, err)
	}
	w.sendErr = nil
	b := mustBody(t, call(t, h, post(welcome, "k", welcomeU1)), http.StatusAccepted)
	if b.JobID != message.DeriveMessageID(alice, "k") || len(w.messages()) != 1 {
		t.Fatalf("retry: %+v, %d messages", b, len(w.messages()))
	}
}

func TestCallerIsolation(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	a := mustBody(t, call(t, h, post(welcome, "k", welcomeU1)), http.StatusAccepted)
	b := mustBody(t, call(t, h, post(welcome, "k", welcomeU1, asCaller(bob))), http.StatusAccepted)
	if a.JobID == b.JobID || b.Deduplicated {
		t.Fatalf("bob got alice's job: %+v %+v", a, b)
	}
	checkProblem(t, call(t, h, get(a.JobID, asCaller(bob))), http.StatusNotFound)
	if resp := call(t, h, get(a.JobID)); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice GET: %d %s", resp.StatusCode, resp.Body)
	}
}

func TestGet(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	a := mustBody(t, call(t, h, post(welcome, "k", welcomeU1)), http.StatusAccepted)
	resp := call(t, h, get(a.JobID))
	if resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != enqueue.ContentTypeJSON {
		t.Fatalf("GET: %d %v", resp.StatusCode, resp.Headers)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"jobId", "type", "state", "key", "attempts", "createdAt", "updatedAt", "runAt"} {
		if _, ok := got[f]; !ok {
			t.Errorf("GET body lacks %s: %s", f, resp.Body)
		}
	}
	for _, f := range []string{"args", "message", "caller", "Message"} {
		if _, ok := got[f]; ok || strings.Contains(resp.Body, "u-1\\\"") {
			t.Errorf("GET body leaks %s: %s", f, resp.Body)
		}
	}
}

func TestCallerSources(t *testing.T) {
	tests := []struct {
		name string
		a    *events.APIGatewayV2HTTPRequestContextAuthorizerDescription
		want string
		ok   bool
	}{
		{"none", nil, "", false},
		{"iam arn", &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: alice, AccountID: "1"}}, alice, true},
		{"iam ids", &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "1", CallerID: "AIDA:x"}}, "iam:1:AIDA:x", true},
		{"jwt", &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "user-9"}}}, "jwt:user-9", true},
		{"jwt without sub", &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{}}}, "", false},
		{"control chars", &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "a\nb"}}, "", false},
		{"local stack header caller", &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "local-user"}}, "local-user", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := enqueue.Caller(events.APIGatewayV2HTTPRequestContext{Authorizer: tt.a})
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Caller = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRouteVariants(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	// A named stage prefixes the raw path; a route key without http.method
	// still routes; a base64 body is decoded.
	staged := post(welcome, "k-1", welcomeU1, func(r *events.APIGatewayV2HTTPRequest) {
		r.RawPath = "/dev" + r.RawPath
		r.RequestContext.Stage = "dev"
	})
	mustBody(t, call(t, h, staged), http.StatusAccepted)
	keyed := post(welcome, "k-2", `{"args":{"userId":"u-2"}}`, base64Body, func(r *events.APIGatewayV2HTTPRequest) {
		r.RequestContext.HTTP.Method = ""
		r.RouteKey = "POST /v1/jobs/{type}"
		r.PathParameters = map[string]string{"type": welcome}
	})
	mustBody(t, call(t, h, keyed), http.StatusAccepted)
}

func TestMalformedCatalog(t *testing.T) {
	cases := malformedCatalog()
	if len(cases) < 25 {
		t.Fatalf("catalog has %d cases; want at least 25", len(cases))
	}
	w := newWorld()
	h := newHandler(w)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkProblem(t, call(t, h, c.req), c.status)
		})
	}
	if len(w.requests) != 0 || len(w.jobs) != 0 || len(w.sent) != 0 {
		t.Fatalf("malformed requests stored something: %d requests, %d jobs, %d messages", len(w.requests), len(w.jobs), len(w.sent))
	}
}

func TestDecodeRequestDefaults(t *testing.T) {
	jt, _ := contract.Registry().Lookup(contract.PartnerDigest.Name)
	req, err := contract.DecodeBody(jt, []byte(`{"args":{"userId":"u-1","digestId":"2026-W48"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Key != "partner-digest:u-1:2026-W48" || req.Policy != contract.AllowAfterFailed || req.Delay != 0 {
		t.Fatalf("decoded %+v", req)
	}
}

// failingJobs is a jobs table that is down.
type failingJobs struct{ *world }

func (failingJobs) Reserve(context.Context, jobs.Job, contract.DuplicatePolicy) (jobs.Decision, error) {
	return jobs.Decision{}, errQueueDown
}

func TestStoreFailureIsNotStored(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	h.Jobs = failingJobs{w}
	checkProblem(t, call(t, h, post(welcome, "k", welcomeU1)), http.StatusServiceUnavailable)
	if len(w.requests) != 0 {
		t.Fatalf("a 5xx was stored: %d requests", len(w.requests))
	}
	h.Jobs = w
	mustBody(t, call(t, h, post(welcome, "k", welcomeU1)), http.StatusAccepted)
}

// TestPendingJobOfAnotherRequest: a job whose send failed holds its key; a
// request with another Idempotency-Key waits while it is fresh, then sends
// that job's message (same id) instead of creating a second job.
func TestPendingJobOfAnotherRequest(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	w.sendErr = errQueueDown
	checkProblem(t, call(t, h, post(welcome, "k-a", welcomeU1)), http.StatusServiceUnavailable)
	w.sendErr = nil
	resp := call(t, h, post(welcome, "k-b", welcomeU1))
	checkProblem(t, resp, http.StatusConflict)
	if resp.Headers["Retry-After"] == "" {
		t.Fatal("409 without Retry-After")
	}
	w.advance(jobs.DefaultPendingTimeout + time.Second)
	b := mustBody(t, call(t, h, post(welcome, "k-b", welcomeU1)), http.StatusOK)
	if idA := message.DeriveMessageID(alice, "k-a"); b.JobID != idA || !b.Deduplicated {
		t.Fatalf("body %+v; want dedup of %s", b, idA)
	}
	msgs := w.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	if env, err := message.Decode([]byte(msgs[0].Body)); err != nil || env.MessageID != b.JobID {
		t.Fatalf("message %+v, %v", env, err)
	}
}

// The enqueue function's line about a job carries its id, natural key and
// trace id, so one search finds the request's line beside the worker's.
func TestJobLineCarriesKeyAndTrace(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	var logs strings.Builder
	h.Logger = obs.NewLogger(&logs, "info")
	const trace = "1-5759e988-bd862e3fe1be46a994272793"
	mustBody(t, call(t, h, post(verify, "k-log", verifyBody, withHeader("X-Amzn-Trace-Id", "Root="+trace+";Sampled=1"))), http.StatusAccepted)
	for _, l := range obstest.Lines(logs.String()) {
		if l["msg"] != "enqueue: job queued" {
			continue
		}
		if l[obs.KeyJobID] != message.DeriveMessageID(alice, "k-log") || l[obs.KeyMessageID] != l[obs.KeyJobID] || l[obs.KeyKey] != "partner-verification:u-123" || l[obs.KeyTraceID] != trace {
			t.Fatalf("job line %v lacks the job id, key or trace id", l)
		}
		return
	}
	t.Fatalf("no job line in:\n%s", logs.String())
}
