//go:build integration

package enqueue_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
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
	if _, err := s.markers.Claim(ctx, jobs.Job{ID: parent.JobID, Type: welcome}.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(s.clock.Now(), s.clock.Now(), engine.DefaultRetention)}); err != nil {
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

// An outbox child relayed before its parent's item (written in the same
// transaction, in another shard, or held back by an outage) is not refused:
// it waits for a parent that does not exist yet, and runs when that parent,
// relayed later, succeeds. A child whose parent never comes waits as long
// as the parent's item could still be relayed, then is cancelled, naming
// it. A child after another caller's job is made Cancelled at once, with
// the reason (202 Cancelled: the relay is done with it).
func TestIntegrationOutboxChildBeforeItsParent(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	const producer = "outbox:signup"
	parentID := message.DeriveMessageID(producer, "k-parent")
	child := s.h.EnqueueFor(ctx, enqueue.Request{Caller: producer, Type: welcome, IdempotencyKey: "k-child",
		Body: []byte(`{"args":{"userId":"u-2"},"after":"` + parentID + `"}`)})
	if child.Status != http.StatusAccepted || child.State != string(jobs.StateAwaitingContinuation) {
		t.Fatalf("the child relayed before its parent: %+v; want 202 AwaitingContinuation", child)
	}
	s.clock.Advance(time.Hour) // a sweep meanwhile leaves it waiting
	if _, err := s.jobs.SweepContinuations(ctx, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.jobs.Get(ctx, child.JobID); j.State != jobs.StateAwaitingContinuation {
		t.Fatalf("an hour on, before its parent's item was relayed, the child reads %s (%s)", j.State, j.LastReason)
	}
	parent := s.h.EnqueueFor(ctx, enqueue.Request{Caller: producer, Type: welcome, IdempotencyKey: "k-parent",
		Body: []byte(`{"args":{"userId":"u-1"}}`)})
	if parent.Status != http.StatusAccepted || parent.JobID != parentID {
		t.Fatalf("the parent: %+v", parent)
	}
	if _, err := s.markers.Claim(ctx, jobs.Job{ID: parentID, Type: welcome}.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(s.clock.Now(), s.clock.Now(), engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.jobs.ReleaseContinuations(ctx, parentID, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.jobs.Get(ctx, child.JobID); j.State != jobs.StateEnqueued {
		t.Fatalf("after its parent succeeded the child reads %s; want Enqueued", j.State)
	}
	// A parent that never comes.
	orphan := s.h.EnqueueFor(ctx, enqueue.Request{Caller: producer, Type: welcome, IdempotencyKey: "k-orphan",
		Body: []byte(`{"args":{"userId":"u-3"},"after":"` + message.DeriveMessageID(producer, "k-never") + `"}`)})
	s.clock.Advance(lifetime.RelayDecision + time.Minute)
	if _, err := s.jobs.SweepContinuations(ctx, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.jobs.Get(ctx, orphan.JobID); j.State != jobs.StateCancelled || !strings.Contains(j.LastReason, message.DeriveMessageID(producer, "k-never")) {
		t.Fatalf("a child whose parent never came reads %s %q; want Cancelled naming it", j.State, j.LastReason)
	}
	// Another caller's job is no parent of an outbox item.
	theirs := mustBody(t, call(t, s.h, post(welcome, "theirs", welcomeU1)), http.StatusAccepted)
	a := s.h.EnqueueFor(ctx, enqueue.Request{Caller: producer, Type: welcome, IdempotencyKey: "k-theirs",
		Body: []byte(`{"args":{"userId":"u-4"},"after":"` + theirs.JobID + `"}`)})
	if a.Status != http.StatusAccepted || a.State != string(jobs.StateCancelled) {
		t.Fatalf("an outbox child after another caller's job: %+v; want 202 Cancelled", a)
	}
	if j, _ := s.jobs.Get(ctx, a.JobID); j.State != jobs.StateCancelled || !strings.Contains(j.LastReason, theirs.JobID) {
		t.Fatalf("it reads %s %q; want Cancelled naming the job", j.State, j.LastReason)
	}
	if _, envs := s.receive(t, contract.QueueDefault); slices.ContainsFunc(envs, func(e message.Envelope) bool { return e.MessageID == a.JobID }) {
		t.Fatalf("the refused child was sent: %+v", envs)
	}
}

// A continuation decided at once is sent by the request that made it, as
// any job is: when that send fails, the request answers the 503 of any
// job's failed send (never a 202 Pending that only the continuation sweep,
// five minutes on, would honour), and the caller's retry under the same
// key sends it, once. So does a batch: its try fails, and its retry sends
// the continuation.
func TestIntegrationAContinuationDecidedAtOnceIsSentByItsRequest(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	parent := mustBody(t, call(t, s.h, post(welcome, "parent", welcomeU1)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	if _, err := s.markers.Claim(ctx, jobs.Job{ID: parent.JobID, Type: welcome}.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(s.clock.Now(), s.clock.Now(), engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	req := post(welcome, "after-done", `{"args":{"userId":"u-2"},"after":"`+parent.JobID+`"}`)
	s.h.Queue = &failAfter{q: s.queue}
	p := checkProblem(t, call(t, s.h, req), http.StatusServiceUnavailable)
	s.h.Queue = s.queue
	if !strings.Contains(p.Detail, "retry with the same Idempotency-Key") {
		t.Fatalf("the failed send answered %+v; want the detail of any job's failed send", p)
	}
	id := message.DeriveMessageID(alice, "after-done")
	if j, err := s.jobs.Get(ctx, id); err != nil || j.State != jobs.StatePending {
		t.Fatalf("after its failed send the continuation reads %v %v; want Pending", j.State, err)
	}
	b := mustBody(t, call(t, s.h, req), http.StatusAccepted)
	if b.State != string(jobs.StateEnqueued) || b.JobID != id {
		t.Fatalf("the retry answered %+v; want the continuation Enqueued", b)
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 1 || envs[0].MessageID != id {
		t.Fatalf("sent %+v; want the continuation once", envs)
	}

	body := `{"jobs":[{"type":"` + welcome + `","args":{"userId":"u-3"},"after":"` + parent.JobID + `"}]}`
	s.h.Queue = &failAfter{q: s.queue, n: 1} // the finisher; then SQS fails
	if r := call(t, s.h, postBatch("batch-after-done", body)); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a batch whose continuation's send failed answered %d %s; want 503", r.StatusCode, r.Body)
	}
	s.h.Queue = s.queue
	bid := enqueue.BatchJobID(alice, "batch-after-done", 0)
	retry := decodeBatch(t, call(t, s.h, postBatch("batch-after-done", body)), http.StatusAccepted)
	if len(retry.Jobs) != 1 || retry.Jobs[0].JobID != bid || retry.Jobs[0].State != string(jobs.StateEnqueued) {
		t.Fatalf("the batch's retry answered %+v; want its continuation Enqueued", retry.Jobs)
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 1 || envs[0].MessageID != bid {
		t.Fatalf("sent %+v; want the batch's continuation once", envs)
	}
}
