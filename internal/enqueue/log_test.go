package enqueue_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/message"
)

// Every request line about a job carries its jobId, a refused one too, with
// the problem's type and detail (as its reason): filtering the log by a job
// finds a refused DELETE, a rejected duplicate, an invalid POST.
func TestRequestLinesNameTheJobAndTheRefusal(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	done := mustBody(t, call(t, h, post(welcome, "k-done", welcomeU1)), http.StatusAccepted)
	w.setState(done.JobID, jobs.StateSucceeded)
	missing := message.NewMessageID()
	for _, tc := range []struct {
		name    string
		req     events.APIGatewayV2HTTPRequest
		jobID   string
		problem string // "" for no problem
		detail  string // a part of the reason
		state   string
	}{
		{"accepted POST", post(welcome, "k-new", welcomeU1), message.DeriveMessageID(alice, "k-new"), "", "", ""},
		{"GET", get(done.JobID), done.JobID, "", "", ""},
		{"refused DELETE: the job ran", request(http.MethodDelete, "/v1/jobs/"+done.JobID, ""), done.JobID,
			enqueue.ProblemNotCancellable, "can no longer be cancelled", "Succeeded"},
		{"DELETE of another caller's job", request(http.MethodDelete, "/v1/jobs/"+done.JobID, "", asCaller(bob)), done.JobID,
			enqueue.ProblemNotFound, "you have no job", ""},
		{"GET of no job", get(missing), missing, enqueue.ProblemNotFound, "you have no job " + missing, ""},
		{"invalid POST", post(welcome, "k-bad", `{"args":{}}`), message.DeriveMessageID(alice, "k-bad"),
			enqueue.ProblemValidation, "args.userId", ""},
		{"a path id that is no job id", get("not-a-job"), "", enqueue.ProblemValidation, "lower-case canonical UUID", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			h.Logger = obs.NewLogger(&logs, "info")
			call(t, h, tc.req)
			var line map[string]any
			for _, l := range obstest.Lines(logs.String()) {
				if l["msg"] == "enqueue: request" {
					line = l
				}
			}
			if line == nil {
				t.Fatalf("no request line in:\n%s", logs.String())
			}
			id, _ := line[obs.KeyJobID].(string)
			problem, _ := line["problem"].(string)
			reason, _ := line[obs.KeyReason].(string)
			state, _ := line["state"].(string)
			if id != tc.jobID || problem != tc.problem || !strings.Contains(reason, tc.detail) || (tc.problem == "") != (reason == "") || state != tc.state {
				t.Errorf("request line %v; want jobId %q, problem %q, a reason with %q, state %q", line, tc.jobID, tc.problem, tc.detail, tc.state)
			}
		})
	}
}
