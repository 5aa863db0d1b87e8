//go:build integration

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// The edges of a job's life, through the running local stack: they run as
// subtests of TestEndToEnd, on its stack.

// requestAs is request with extra headers (X-Caller, X-Amzn-Trace-Id).
func (e *e2e) requestAs(method, path, key, body string, headers map[string]string) response {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.api+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, headers: resp.Header}
	_ = json.NewDecoder(resp.Body).Decode(&r.body)
	return r
}

// job reads a job's state and last outcome.
func (e *e2e) job(id string) (state, outcome string) {
	b := e.request("GET", "/v1/jobs/"+id, "", "").body
	state, _ = b["state"].(string)
	outcome, _ = b["lastOutcome"].(string)
	return state, outcome
}

// mailsOfJob counts the mails devstack printed for a job.
func (e *e2e) mailsOfJob(to, jobID string) int {
	n := 0
	for _, m := range e.mails(to) {
		if m.JobID == jobID {
			n++
		}
	}
	return n
}

func (e *e2e) toggle(t *testing.T, jobType, value string) {
	t.Helper()
	if code, out, stderr := e.run("toggles", "set", jobType, value); code != 0 {
		t.Fatalf("toggles set %s %s: %d %s %s", jobType, value, code, out, stderr)
	}
	time.Sleep(1500 * time.Millisecond) // the workers' toggle TTL
}

// Two sessions of one assumed role are one caller: the second session's
// retry replays, and sees the job; another role does not.
func (e *e2e) assumedRoleSessions(t *testing.T) {
	const (
		session1 = "arn:aws:sts::123456789012:assumed-role/orders-task/session-1"
		session2 = "arn:aws:sts::123456789012:assumed-role/orders-task/session-2"
		other    = "arn:aws:sts::123456789012:assumed-role/billing-task/session-1"
	)
	body := `{"args":{"userId":"u-demo-2"},"key":"e2e-role"}`
	first := e.requestAs("POST", "/v1/jobs/email.welcome.v1", "e2e-role", body, map[string]string{"X-Caller": session1})
	again := e.requestAs("POST", "/v1/jobs/email.welcome.v1", "e2e-role", body, map[string]string{"X-Caller": session2})
	if first.status != http.StatusAccepted || again.headers.Get("Idempotent-Replayed") != "true" || again.body["jobId"] != first.body["jobId"] {
		t.Fatalf("first %d %v; retry from a new session %d %v %v; want a replay of the same job", first.status, first.body, again.status, again.headers, again.body)
	}
	id, _ := first.body["jobId"].(string)
	if r := e.requestAs("GET", "/v1/jobs/"+id, "", "", map[string]string{"X-Caller": session2}); r.status != http.StatusOK {
		t.Fatalf("GET from another session of the role = %d; want 200", r.status)
	}
	if r := e.requestAs("GET", "/v1/jobs/"+id, "", "", map[string]string{"X-Caller": other}); r.status != http.StatusNotFound {
		t.Fatalf("GET from another role = %d; want 404", r.status)
	}
}

// A parked job reads Parked, keeps its key (a second enqueue is a
// duplicate of it), and runs once when its switch is on.
func (e *e2e) parkedJob(t *testing.T) {
	const digest = `{"args":{"userId":"u-demo-2","digestId":"2026-W48"}}`
	r := e.request("POST", "/v1/jobs/email.partner-digest.v1", "e2e-digest-1", digest)
	id, _ := r.body["jobId"].(string)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST digest = %d %v", r.status, r.body)
	}
	// The bulk queue gathers a batch for up to its 20 s batching window
	// before the worker sees the digest at all.
	eventually(t, 45*time.Second, "the fail-closed digest never read Parked", func() bool {
		state, outcome := e.job(id)
		return state == "Parked" && outcome == "parked"
	})
	time.Sleep(3 * time.Second) // parked again at least once
	twin := e.request("POST", "/v1/jobs/email.partner-digest.v1", "e2e-digest-2", digest)
	if twin.status != http.StatusOK || twin.body["jobId"] != id || twin.body["deduplicated"] != true {
		t.Fatalf("a second digest for the same key = %d %v; want a duplicate of the parked job", twin.status, twin.body)
	}
	if n := e.mailsOfJob("demo2@example.com", id); n != 0 {
		t.Fatalf("%d digest mails while its switch is off", n)
	}
	e.toggle(t, "email.partner-digest.v1", "on")
	eventually(t, 30*time.Second, "the parked digest never ran once its switch was on", func() bool {
		state, _ := e.job(id)
		return state == "Succeeded" && e.mailsOfJob("demo2@example.com", id) == 1
	})
	e.toggle(t, "email.partner-digest.v1", "off")
}

// A redriven dead letter makes its job active again: while it is back in
// its queue, an enqueue of the same key is a duplicate of it, not a twin.
func (e *e2e) redriveReactivates(t *testing.T) {
	db := dynamodb.NewFromConfig(moto.Config(e.endpoint, "us-east-1"))
	put := func(email string) {
		t.Helper()
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.resources["UsersTable"]), Item: map[string]types.AttributeValue{
			"userId": &types.AttributeValueMemberS{Value: "u-e2e-broken"}, "email": &types.AttributeValueMemberS{Value: email},
			"displayName": &types.AttributeValueMemberS{Value: "Broken"},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("not an address") // a permanent failure: straight to the DLQ
	const welcome = `{"args":{"userId":"u-e2e-broken"}}`
	r := e.request("POST", "/v1/jobs/email.welcome.v1", "e2e-broken-1", welcome)
	id, _ := r.body["jobId"].(string)
	eventually(t, 30*time.Second, "the broken job never read Failed", func() bool {
		state, outcome := e.job(id)
		return state == "Failed" && outcome == "dead-lettered"
	})
	put("broken@example.com")
	e.toggle(t, "email.welcome.v1", "off") // so the redriven job waits, active, where the test can see it
	if code, out, stderr := e.run("dlq", "redrive", id); code != 0 {
		t.Fatalf("dlq redrive: %d %s %s", code, out, stderr)
	}
	if state, _ := e.job(id); state == "Failed" || state == "Succeeded" {
		t.Fatalf("after the redrive the job reads %s; want it active again", state)
	}
	twin := e.request("POST", "/v1/jobs/email.welcome.v1", "e2e-broken-2", welcome)
	if twin.status != http.StatusOK || twin.body["jobId"] != id {
		t.Fatalf("an enqueue of the redriven key = %d %v; want a duplicate of the redriven job", twin.status, twin.body)
	}
	e.toggle(t, "email.welcome.v1", "on")
	eventually(t, 30*time.Second, "the redriven job never succeeded", func() bool {
		state, _ := e.job(id)
		return state == "Succeeded" && e.mailsOfJob("broken@example.com", id) == 1
	})
}

// Cancel: 202 Cancelled (again on a repeat), the job never runs; 409 with
// the state for a job that ran.
func (e *e2e) cancel(t *testing.T, succeededJob string) {
	r := e.request("POST", "/v1/jobs/email.welcome.v1", "e2e-cancel", `{"args":{"userId":"u-demo-1"},"key":"e2e-cancel","delaySeconds":6}`)
	id, _ := r.body["jobId"].(string)
	if r.status != http.StatusAccepted || r.body["state"] != "Scheduled" {
		t.Fatalf("POST delayed = %d %v", r.status, r.body)
	}
	for range 2 {
		if d := e.request("DELETE", "/v1/jobs/"+id, "", ""); d.status != http.StatusAccepted || d.body["state"] != "Cancelled" {
			t.Fatalf("DELETE = %d %v; want 202 Cancelled", d.status, d.body)
		}
	}
	if d := e.requestAs("DELETE", "/v1/jobs/"+id, "", "", map[string]string{"X-Caller": "somebody-else"}); d.status != http.StatusNotFound {
		t.Fatalf("another caller's DELETE = %d; want 404", d.status)
	}
	if d := e.request("DELETE", "/v1/jobs/"+succeededJob, "", ""); d.status != http.StatusConflict || d.body["state"] != "Succeeded" {
		t.Fatalf("DELETE of a succeeded job = %d %v; want 409 with its state", d.status, d.body)
	}
	time.Sleep(10 * time.Second) // past its delay: its message was delivered
	if state, _ := e.job(id); state != "Cancelled" || e.mailsOfJob("demo1@example.com", id) != 0 {
		t.Fatalf("cancelled job reads %s with %d mails; want Cancelled and none", state, e.mailsOfJob("demo1@example.com", id))
	}
}

// One traceId from the enqueue request to the worker's lines of the same
// job.
func (e *e2e) traceFlows(t *testing.T) {
	const root = "1-6a0c1c8e-0123456789abcdef01234567"
	r := e.requestAs("POST", "/v1/jobs/email.welcome.v1", "e2e-trace", `{"args":{"userId":"u-demo-1"},"key":"e2e-trace"}`,
		map[string]string{"X-Amzn-Trace-Id": "Root=" + root + ";Sampled=1"})
	id, _ := r.body["jobId"].(string)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST = %d %v", r.status, r.body)
	}
	eventually(t, 30*time.Second, "no enqueue and worker lines with the request's traceId", func() bool {
		seen := map[string]bool{}
		b, _ := os.ReadFile(filepath.Join(e.state, devstack.FunctionsLog))
		for _, line := range strings.Split(string(b), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && l["traceId"] == root {
				fn, _ := l["function"].(string)
				seen[fn] = true
				if fn == "email" && l["jobId"] != id {
					t.Fatalf("a worker line with the trace names job %v; want %s", l["jobId"], id)
				}
			}
		}
		return seen["enqueue"] && seen["email"]
	})
	var got map[string]any
	if code, out, _ := e.run("jobs", "get", id, "--json"); code != 0 || json.Unmarshal([]byte(out), &got) != nil || got["traceId"] != root {
		t.Fatalf("jobctl jobs get %s: %d %s; want the traceId", id, code, out)
	}
}

// The local web view shows the stack: jobs, mails, dead letters, switches.
func (e *e2e) webView(t *testing.T, jobID string) {
	resp, err := http.Get(e.api + devstack.ViewPath + "?refresh=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{jobID, "demo1@example.com", "email.partner-digest.v1"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("GET %s = %d; want it to show %s", devstack.ViewPath, resp.StatusCode, want)
		}
	}
	// A switch flipped from the view is printed as the job lines are (it
	// is off already: the flip changes nothing the other subtests see).
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	flip, err := noRedirect.PostForm(e.api+devstack.ViewPath+"switches", url.Values{"type": {"email.partner-digest.v1"}, "state": {"off"}})
	if err != nil {
		t.Fatal(err)
	}
	flip.Body.Close()
	if flip.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST switches = %d; want 303", flip.StatusCode)
	}
	line := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  webview: switch set  type=email.partner-digest.v1 enabled=false$`)
	eventually(t, 5*time.Second, "make run did not print the switch flip as a job line:\n"+e.out.String(), func() bool {
		return line.MatchString(e.out.String())
	})
	if strings.Contains(e.out.String(), "INFO webview") {
		t.Fatalf("make run printed a line of log's own format:\n%s", e.out.String())
	}
}

// Step 9 of the runner through the running stack: every claim fails (the
// fault proxy answers 500 to each PutItem that would mark a marker DONE,
// every retry included). The welcome mail goes out once, the record is
// reported done (no retry, no dead letter), the job reads Succeeded with
// lastOutcome claim-failed rather than Processing or Failed, make run prints
// the outcome, and ClaimFailed is counted for its alarm.
func TestClaimFailedEndToEnd(t *testing.T) {
	e := startDevstack(t, "--faults", "dynamodb:PutItem~HandlerName~DONE:500")
	r := e.request("POST", "/v1/jobs/email.welcome.v1", "e2e-claim-fails", `{"args":{"userId":"u-demo-2"}}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST = %d %v; want 202", r.status, r.body)
	}
	id, _ := r.body["jobId"].(string)
	eventually(t, time.Minute, "the job never read Succeeded with lastOutcome claim-failed", func() bool {
		state, outcome := e.job(id)
		return state == "Succeeded" && outcome == "claim-failed"
	})
	if !strings.Contains(e.out.String(), "claim-failed") {
		t.Fatalf("make run printed no claim-failed line:\n%s", e.out.String())
	}
	eventually(t, 30*time.Second, "ClaimFailed not counted in metrics.log", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.state, devstack.MetricsLog))
		return strings.Contains(string(b), `"ClaimFailed":1`)
	})
	// Reported done: its message leaves the queue (a retried record would
	// stay in flight until its visibility timeout), so there is no second
	// mail and no dead letter.
	queues := sqs.NewFromConfig(moto.Config(e.endpoint, "us-east-1"))
	eventually(t, 30*time.Second, "the job's message is still in its queue", func() bool {
		out, err := queues.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(e.resources["DefaultQueue"]),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		return err == nil && out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
	})
	if n := e.mailsOfJob("demo2@example.com", id); n != 1 {
		t.Fatalf("%d mails for the job; want exactly 1", n)
	}
	code, out, _ := e.run("dlq", "list", "--json")
	var list struct{ Letters []json.RawMessage }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Letters) != 0 {
		t.Fatalf("dlq list = %d %s; want no dead letters", code, out)
	}
}
