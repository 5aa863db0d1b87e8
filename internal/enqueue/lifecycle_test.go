package enqueue_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// The caller is the principal, not the credentials' session: two sessions
// of one assumed role are one caller; another role is another.
func TestAssumedRoleSessionsAreOneCaller(t *testing.T) {
	const (
		session1  = "arn:aws:sts::123456789012:assumed-role/orders-task/1700000000000000000"
		session2  = "arn:aws:sts::123456789012:assumed-role/orders-task/ecs-task-4711"
		otherRole = "arn:aws:sts::123456789012:assumed-role/billing-task/ecs-task-4711"
	)
	w := newWorld()
	h := newHandler(w)
	first := mustBody(t, call(t, h, post(welcome, "k-1", welcomeU1, asCaller(session1))), http.StatusAccepted)
	again := call(t, h, post(welcome, "k-1", welcomeU1, asCaller(session2)))
	if again.Headers["Idempotent-Replayed"] != "true" || len(w.messages()) != 1 {
		t.Fatalf("a new session of the same role enqueued again (replayed %q, %d messages)", again.Headers["Idempotent-Replayed"], len(w.messages()))
	}
	if r := call(t, h, request(http.MethodGet, "/v1/jobs/"+first.JobID, "", asCaller(session2))); r.StatusCode != http.StatusOK {
		t.Fatalf("GET from another session of the role = %d; want 200", r.StatusCode)
	}
	if r := call(t, h, request(http.MethodGet, "/v1/jobs/"+first.JobID, "", asCaller(otherRole))); r.StatusCode != http.StatusNotFound {
		t.Fatalf("GET from another role = %d; want 404", r.StatusCode)
	}
}

func TestCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		iam  *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
		jwt  map[string]string
		want string
	}{
		{"IAM user", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/alice"}, nil, "arn:aws:iam::1:user/alice"},
		{"assumed role", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:sts::1:assumed-role/r/s"}, nil, "arn:aws:sts::1:assumed-role/r"},
		{"assumed role in another partition", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws-cn:sts::1:assumed-role/r/s"}, nil, "arn:aws-cn:sts::1:assumed-role/r"},
		{"malformed assumed role kept", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:sts::1:assumed-role/r"}, nil, "arn:aws:sts::1:assumed-role/r"},
		{"role id without an ARN", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "1", CallerID: "AROAEXAMPLE:session-9"}, nil, "iam:1:AROAEXAMPLE"},
		{"user id without an ARN", &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "1", CallerID: "AIDAEXAMPLE"}, nil, "iam:1:AIDAEXAMPLE"},
		{"JWT", nil, map[string]string{"sub": "user-7"}, "jwt:user-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: tc.iam}
			if tc.jwt != nil {
				a.JWT = &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: tc.jwt}
			}
			got, ok := enqueue.Caller(events.APIGatewayV2HTTPRequestContext{Authorizer: a})
			if !ok || got != tc.want {
				t.Fatalf("Caller = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

type problemBody struct {
	Type   string               `json:"type"`
	Status int                  `json:"status"`
	Detail string               `json:"detail"`
	State  string               `json:"state"`
	Errors []message.FieldError `json:"errors"`
}

func problemOf(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int) problemBody {
	t.Helper()
	var p problemBody
	if resp.StatusCode != status || resp.Headers["Content-Type"] != enqueue.ContentTypeProblem || json.Unmarshal([]byte(resp.Body), &p) != nil {
		t.Fatalf("response %d %v %s; want a %d problem", resp.StatusCode, resp.Headers, resp.Body, status)
	}
	return p
}

// DELETE /v1/jobs/{jobId}: 202 Cancelled (again on a repeat), 409 with the
// state once it ran, 404 for anyone else.
func TestCancel(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	b := mustBody(t, call(t, h, post(welcome, "k-1", welcomeU1)), http.StatusAccepted)
	del := func(caller string) events.APIGatewayV2HTTPResponse {
		return call(t, h, request(http.MethodDelete, "/v1/jobs/"+b.JobID, "", asCaller(caller)))
	}
	if r := del(bob); r.StatusCode != http.StatusNotFound {
		t.Fatalf("another caller's DELETE = %d; want 404", r.StatusCode)
	}
	for i := range 2 {
		r := del(alice)
		var j jobs.Job
		if r.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(r.Body), &j) != nil || j.State != jobs.StateCancelled {
			t.Fatalf("DELETE %d = %d %s; want 202 Cancelled", i+1, r.StatusCode, r.Body)
		}
	}
	// A new job may follow a cancelled one under AllowAfterFailed.
	next := mustBody(t, call(t, h, post(welcome, "k-2", welcomeU1)), http.StatusAccepted)
	w.setState(next.JobID, jobs.StateSucceeded)
	r := call(t, h, request(http.MethodDelete, "/v1/jobs/"+next.JobID, ""))
	if p := problemOf(t, r, http.StatusConflict); p.State != "Succeeded" || !strings.HasSuffix(p.Type, enqueue.ProblemNotCancellable) {
		t.Fatalf("DELETE of a succeeded job = %+v; want 409 naming the state", p)
	}
}

// Errors say where the problem is and what is allowed, with an example.
func TestErrorsAUserCanActOn(t *testing.T) {
	h := newHandler(newWorld())
	missingKey := problemOf(t, call(t, h, post(welcome, "k", welcomeU1, withoutHeader("Idempotency-Key"))), http.StatusBadRequest)
	if !strings.Contains(missingKey.Detail, "header Idempotency-Key") || !strings.Contains(missingKey.Detail, "e.g. Idempotency-Key:") {
		t.Errorf("missing key detail %q; want it to name the header and give an example", missingKey.Detail)
	}
	extra := problemOf(t, call(t, h, post(verify, "k", `{"args":{"userId":"u-1","roleCode":"r","countryCode":"BD","lang":"en"}}`)), http.StatusBadRequest)
	if !strings.Contains(extra.Detail, "args.lang") || !strings.Contains(extra.Detail, "userId, roleCode, countryCode") || strings.Contains(extra.Detail, "invalid: invalid") {
		t.Errorf("unknown arg detail %q; want the field and the type's valid args", extra.Detail)
	}
	noArgs := problemOf(t, call(t, h, post(verify, "k", `{}`)), http.StatusBadRequest)
	if !strings.Contains(noArgs.Detail, `"countryCode":"BD"`) {
		t.Errorf("missing args detail %q; want an example", noArgs.Detail)
	}
	if r := call(t, h, post(welcome, "k", welcomeU1)); !strings.HasSuffix(r.Body, "}\n") {
		t.Errorf("JSON body %q does not end with a newline", r.Body)
	}
}

// Suspected, settled: a job cancelled between its send and its promotion
// fails the promotion; the answer stored under the key (and replayed for its
// whole life) says Cancelled, never the Enqueued it no longer is.
func TestPromotionLostToACancelStoresTheTrueState(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	w.onSend = func(m sqsqueue.Message) {
		env, err := message.Decode([]byte(m.Body))
		if err != nil {
			t.Error(err)
			return
		}
		w.setState(env.MessageID, jobs.StateCancelled) // DELETE won the race
	}
	first := call(t, h, post(welcome, "k-cancel", welcomeU1))
	w.onSend = nil
	replay := call(t, h, post(welcome, "k-cancel", welcomeU1))
	for name, r := range map[string]events.APIGatewayV2HTTPResponse{"first answer": first, "replay": replay} {
		if b := decodeAccepted(t, r); b.State != string(jobs.StateCancelled) {
			t.Fatalf("%s says %s (%d %s); want Cancelled", name, b.State, r.StatusCode, r.Body)
		}
	}
	if replay.Headers[enqueue.HeaderReplayed] != "true" {
		t.Fatalf("the second request was not a replay: %v", replay.Headers)
	}
}

// A tick type (the weekly digest fan-out) is started by its schedule only:
// a POST of it, or an outbox item of it, is refused with a problem that says
// how to run it, and nothing is reserved or sent.
func TestTickTypesAreNotEnqueued(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	p := problemOf(t, call(t, h, post("email.partner-digest-fanout.v1", "k", `{"args":{"digestId":"2026-W49"}}`)), http.StatusBadRequest)
	if !strings.Contains(p.Detail, "recurring schedule") || !strings.Contains(p.Detail, "schedules trigger") {
		t.Fatalf("detail %q; want it to say the schedule starts it and how", p.Detail)
	}
	a := h.EnqueueFor(context.Background(), enqueue.Request{Caller: "outbox:p", Type: "email.partner-digest-fanout.v1",
		IdempotencyKey: "k", Body: []byte(`{"args":{"digestId":"2026-W49"}}`)})
	if a.Status != http.StatusBadRequest {
		t.Fatalf("outbox answer %+v; want 400", a)
	}
	if len(w.messages()) != 0 || len(w.jobs) != 0 {
		t.Fatal("a refused tick type reserved or sent a job")
	}
}
