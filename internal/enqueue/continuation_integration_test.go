//go:build integration

package enqueue_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
)

// The API's continuations: a job after another of its caller's waits
// (202 AwaitingContinuation, nothing sent, GET shows after and
// afterPolicy); one after a job that has already succeeded is decided at
// once, and that decision releases every continuation still waiting for
// it, each sent once; a retry replays; a parent the caller cannot see is
// 404, stored nowhere.
func TestIntegrationContinuationThroughTheAPI(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	parent := mustBody(t, call(t, s.h, post(welcome, "parent", welcomeU1)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault) // the parent's own message
	waitReq := post(welcome, "waits", `{"args":{"userId":"u-2"},"after":"`+parent.JobID+`"}`)
	waits := mustBody(t, call(t, s.h, waitReq), http.StatusAccepted)
	if waits.State != string(jobs.StateAwaitingContinuation) {
		t.Fatalf("a continuation of a running job reads %s; want AwaitingContinuation", waits.State)
	}
	if msgs, _ := s.receive(t, contract.QueueDefault); len(msgs) != 0 {
		t.Fatalf("a waiting continuation sent %d messages", len(msgs))
	}
	var view struct {
		State       string `json:"state"`
		After       string `json:"after"`
		AfterPolicy string `json:"afterPolicy"`
	}
	if err := json.Unmarshal([]byte(call(t, s.h, get(waits.JobID)).Body), &view); err != nil || view.After != parent.JobID || view.AfterPolicy != "OnSucceeded" {
		t.Fatalf("GET of the continuation: %+v %v; want its after and afterPolicy", view, err)
	}
	// The parent succeeds; a new continuation of it is decided at once and
	// releases the one that waited too.
	if _, err := s.markers.Claim(ctx, jobs.Job{ID: parent.JobID, Type: welcome}.MarkerKey(), "w", s.clock.Now()); err != nil {
		t.Fatal(err)
	}
	late := mustBody(t, call(t, s.h, post(welcome, "late", `{"args":{"userId":"u-3"},"after":"`+parent.JobID+`","afterPolicy":"OnAnyEnd"}`)), http.StatusAccepted)
	if late.State != string(jobs.StateEnqueued) {
		t.Fatalf("a continuation of a job that already succeeded reads %s; want Enqueued", late.State)
	}
	_, envs := s.receive(t, contract.QueueDefault)
	got := map[string]int{}
	for _, e := range envs {
		got[e.MessageID]++
	}
	if len(envs) != 2 || got[waits.JobID] != 1 || got[late.JobID] != 1 {
		t.Fatalf("sent %v; want each continuation once", got)
	}
	if again := call(t, s.h, waitReq); again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("a retry of the continuation's request: %d %v", again.StatusCode, again.Headers)
	}
	if j, err := s.jobs.Get(ctx, waits.JobID); err != nil || j.State != jobs.StateEnqueued {
		t.Fatalf("the continuation that waited reads %v %v; want Enqueued", j.State, err)
	}
	for name, req := range map[string]struct {
		after string
		opts  []reqOpt
	}{
		"no such job":          {after: "5f6b7c1e-8d4e-4a3b-9c2d-1e0f9a8b7c6d"},
		"another caller's job": {after: parent.JobID, opts: []reqOpt{asCaller(bob)}},
	} {
		resp := call(t, s.h, post(welcome, "k-404", `{"args":{"userId":"u-4"},"after":"`+req.after+`"}`, req.opts...))
		p := checkProblem(t, resp, http.StatusNotFound)
		if p.Type != enqueue.ProblemTypePrefix+enqueue.ProblemNotFound || !strings.Contains(p.Detail, req.after) {
			t.Fatalf("%s: %+v", name, p)
		}
	}
}
