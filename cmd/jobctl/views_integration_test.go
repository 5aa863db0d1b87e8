//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/dev/webview"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

// shown is what every view of a job must agree on, times as their text.
type shown struct {
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	LastOutcome string `json:"lastOutcome"`
	LastReason  string `json:"lastReason"`
	CreatedAt   string `json:"createdAt"`
	UpdatedAt   string `json:"updatedAt"`
	RunAt       string `json:"runAt"`
}

// viewsWorld is a stage on moto with the real enqueue API on it, the real
// runner working its jobs (with a handler whose answer the test picks), and
// jobctl and the web view reading it.
type viewsWorld struct {
	*stageWorld
	api      *enqueue.Handler
	run      *runner.Runner
	switches *testkit.Switches
	answer   error // what the handler answers next
	view     http.Handler
	seq      int
}

func (w *viewsWorld) Handle(context.Context, runner.Job) error { return w.answer }

func newViewsWorld(t *testing.T) *viewsWorld {
	t.Helper()
	w := &viewsWorld{stageWorld: newStage(t), switches: &testkit.Switches{}}
	idem := testenv.NewTable(t, w.DB, "idem", idempotency.AttrPK, "")
	w.api = &enqueue.Handler{Registry: contract.Registry(), Idempotency: idempotency.NewStore(w.DB, idem), Jobs: w.Jobs,
		Queue: sqsqueue.New(w.SQS, w.URLs(), ""), Logger: obs.NewLogger(io.Discard, "error")}
	var err error
	w.run, err = runner.New(runner.Config{Registry: contract.Registry(), Handlers: map[string]runner.Handler{contract.Welcome.Name: w},
		Switch: w.switches, Markers: w.Markers, Parker: &testkit.Queues{}, DeadLetterer: &testkit.Queues{}, Jobs: jobs.ForEngine(w.Recorder),
		Logger: obs.NewLogger(io.Discard, "error")})
	if err != nil {
		t.Fatal(err)
	}
	w.view = webview.New(webview.Sources{Jobs: webview.NewJobsTable(w.DB, w.Names.Jobs, w.Names.Markers)}, webview.Options{Refresh: -1})
	return w
}

const viewsCaller = "arn:aws:iam::123456789012:user/alice"

func (w *viewsWorld) call(t *testing.T, method, path, body string, headers map[string]string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	req := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: path, Body: body,
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: viewsCaller}}}}
	for k, v := range headers {
		req.Headers[k] = v
	}
	resp, err := w.api.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// enqueue POSTs a welcome mail for a new user and returns its job id.
func (w *viewsWorld) enqueue(t *testing.T) string {
	t.Helper()
	w.seq++
	resp := w.call(t, http.MethodPost, "/v1/jobs/"+contract.Welcome.Name, `{"args":{"userId":"u-views-`+strconv.Itoa(w.seq)+`"}}`,
		map[string]string{"idempotency-key": "views-" + strconv.Itoa(w.seq)})
	var got struct{ JobID string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &got) != nil {
		t.Fatalf("POST: %d %s", resp.StatusCode, resp.Body)
	}
	return got.JobID
}

// deliver runs the job's message through the runner as SQS's
// receiveCount-th delivery, the handler answering answer.
func (w *viewsWorld) deliver(t *testing.T, id string, receiveCount int, answer error) {
	t.Helper()
	w.answer = answer
	j, err := w.Jobs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, context.Background(), w.run, testkit.RawRecord(j.Message, receiveCount))
}

// get is GET /v1/jobs/{id}.
func (w *viewsWorld) get(t *testing.T, id string) shown {
	t.Helper()
	resp := w.call(t, http.MethodGet, "/v1/jobs/"+id, "", nil)
	var s shown
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &s) != nil {
		t.Fatalf("GET: %d %s", resp.StatusCode, resp.Body)
	}
	return s
}

// cancel is DELETE /v1/jobs/{id}: the job it answers with (202), or only the
// state it names when it refuses (409).
func (w *viewsWorld) cancel(t *testing.T, id string) (shown, bool) {
	t.Helper()
	resp := w.call(t, http.MethodDelete, "/v1/jobs/"+id, "", nil)
	var s shown
	if json.Unmarshal([]byte(resp.Body), &s) != nil {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, resp.Body)
	}
	switch resp.StatusCode {
	case http.StatusAccepted:
		return s, true
	case http.StatusConflict:
		return s, false
	}
	t.Fatalf("DELETE: %d %s", resp.StatusCode, resp.Body)
	return s, false
}

// jobctlGet is `jobctl jobs get ID --json`.
func (w *viewsWorld) jobctlGet(t *testing.T, id string) shown {
	t.Helper()
	code, out, stderr := w.cli("jobs", "get", id, "--json")
	var got struct {
		shown
		DerivedState string `json:"derivedState"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("jobs get --json: exit %d %s %s", code, out, stderr)
	}
	if got.DerivedState != got.State {
		t.Fatalf("jobs get --json: state %q, derivedState %q; want the one state GET shows under both", got.State, got.DerivedState)
	}
	return got.shown
}

var textLine = regexp.MustCompile(`(?m)^(\w+)\s+(.*?)(?: \(stored: .*\))?$`)

// jobctlGetText is `jobctl jobs get ID` as a person reads it.
func (w *viewsWorld) jobctlGetText(t *testing.T, id string) shown {
	t.Helper()
	code, out, stderr := w.cli("jobs", "get", id)
	if code != exitOK {
		t.Fatalf("jobs get: exit %d %s %s", code, out, stderr)
	}
	f := map[string]string{}
	for _, m := range textLine.FindAllStringSubmatch(out, -1) {
		f[m[1]] = m[2]
	}
	state, _, _ := strings.Cut(f["state"], " (derived")
	n, err := strconv.Atoi(f["attempts"])
	if err != nil {
		t.Fatalf("jobs get: attempts %q:\n%s", f["attempts"], out)
	}
	none := func(v string) string { // jobctl shows "-" for a field the view leaves empty
		if v == "-" {
			return ""
		}
		return v
	}
	return shown{State: state, Attempts: n, LastOutcome: none(f["lastOutcome"]), LastReason: none(f["lastReason"]),
		CreatedAt: f["createdAt"], UpdatedAt: f["updatedAt"], RunAt: f["runAt"]}
}

// jobctlList is the job's entry in `jobctl jobs list --json`.
func (w *viewsWorld) jobctlList(t *testing.T, id string) shown {
	t.Helper()
	code, out, stderr := w.cli("jobs", "list", "--json")
	var list []struct {
		JobID string `json:"jobId"`
		shown
	}
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("jobs list --json: exit %d %s %s", code, out, stderr)
	}
	for _, s := range list {
		if s.JobID == id {
			return s.shown
		}
	}
	t.Fatalf("jobs list lacks %s:\n%s", id, out)
	return shown{}
}

// webRow is the job's row of the web view, as its lister reads it, and the
// row as the page renders it.
func (w *viewsWorld) webRow(t *testing.T, id string) (shown, string) {
	t.Helper()
	rows, err := webview.NewJobsTable(w.DB, w.Names.Jobs, w.Names.Markers).Recent(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var s shown
	for _, r := range rows {
		if r.ID == id {
			s = shown{State: r.State, Attempts: r.Attempts, LastOutcome: r.LastOutcome, LastReason: r.LastReason,
				CreatedAt: r.CreatedAt.Format(time.RFC3339Nano), UpdatedAt: r.UpdatedAt.Format(time.RFC3339Nano), RunAt: r.RunAt.Format(time.RFC3339Nano)}
		}
	}
	if s.State == "" {
		t.Fatalf("the web view lists no %s", id)
	}
	rec := httptest.NewRecorder()
	w.view.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/_local/?refresh=0", nil))
	page := rec.Body.String()
	start := strings.Index(page, `<tr data-job="`+id+`">`)
	if start < 0 {
		t.Fatalf("the page has no row of %s", id)
	}
	end := strings.Index(page[start:], "</tr>")
	return s, page[start : start+end]
}

// TestEveryViewOfAJobAgrees reads one job through every view — GET, the
// DELETE answer, `jobctl jobs get` (JSON and text), `jobctl jobs list` and
// the web view's row — in each state a job reaches, and requires the same
// state, attempts, last outcome, reason and times (to the millisecond,
// UTC) everywhere, an updatedAt that moved with the state, and a web row
// that is red only when the job ended badly.
func TestEveryViewOfAJobAgrees(t *testing.T) {
	w := newViewsWorld(t)
	ctx := context.Background()
	type want struct {
		state    jobs.State
		attempts int
		outcome  string
		reason   string
		// claimed: updatedAt is when the marker was claimed.
		claimed bool
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T) string
		want want
	}{
		{"enqueued", w.enqueue, want{state: jobs.StateEnqueued}},
		{"parked, then succeeded", func(t *testing.T) string {
			id := w.enqueue(t)
			w.switches.Set(contract.Welcome.Name, false)
			w.deliver(t, id, 1, nil)
			if s := w.get(t, id); s.State != string(jobs.StateParked) {
				t.Fatalf("after the park the job reads %s", s.State)
			}
			w.switches.Set(contract.Welcome.Name, true)
			time.Sleep(5 * time.Millisecond) // the claim is later than the park
			w.deliver(t, id, 2, nil)
			return id
		}, want{state: jobs.StateSucceeded, attempts: 1, outcome: jobs.OutcomeSucceeded, claimed: true}},
		{"succeeded", func(t *testing.T) string {
			id := w.enqueue(t)
			time.Sleep(5 * time.Millisecond)
			w.deliver(t, id, 1, nil)
			return id
		}, want{state: jobs.StateSucceeded, attempts: 1, outcome: jobs.OutcomeSucceeded, claimed: true}},
		{"no-op", func(t *testing.T) string {
			id := w.enqueue(t)
			w.deliver(t, id, 1, engine.NoOp("no mail needed: user not found"))
			return id
		}, want{state: jobs.StateSucceeded, attempts: 1, outcome: jobs.OutcomeNoop, reason: "no mail needed: user not found"}},
		{"cancelled", func(t *testing.T) string {
			id := w.enqueue(t)
			first, ok := w.cancel(t, id)
			if !ok {
				t.Fatalf("DELETE refused: %+v", first)
			}
			// The answer of the DELETE that cancelled it is a view too.
			if now := w.get(t, id); first != now {
				t.Errorf("the DELETE answer and a GET right after disagree:\nDELETE %+v\nGET    %+v", first, now)
			}
			return id
		}, want{state: jobs.StateCancelled, outcome: jobs.OutcomeCancelled, reason: "cancelled by its caller"}},
		{"failed", func(t *testing.T) string {
			id := w.enqueue(t)
			w.deliver(t, id, engine.DefaultMaxReceiveCount, errors.New("SES throttled"))
			return id
		}, want{state: jobs.StateFailed, attempts: engine.DefaultMaxReceiveCount, outcome: jobs.OutcomeDeadLettered,
			reason: "failed on its final attempt (5): SES throttled"}},
		{"redriven", func(t *testing.T) string {
			id := w.enqueue(t)
			w.deliver(t, id, engine.DefaultMaxReceiveCount, errors.New("SES throttled"))
			j, err := w.Jobs.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Letters.Save(ctx, deadletter.Record{ID: id, JobID: id, Type: j.Type, Body: j.Message,
				Reason: "exceeded maxReceiveCount (5 receives)", ReceiveCount: 5, Status: deadletter.StatusDead}, "sqs-"+id); err != nil {
				t.Fatal(err)
			}
			if code, out, stderr := w.cli("dlq", "redrive", id); code != exitOK {
				t.Fatalf("dlq redrive: exit %d %s %s", code, out, stderr)
			}
			return id
		}, want{state: jobs.StateEnqueued, attempts: engine.DefaultMaxReceiveCount, outcome: jobs.OutcomeRedriven,
			reason: "redriven by an operator after it was dead-lettered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.make(t)
			views := map[string]shown{"GET": w.get(t, id), "jobctl jobs get --json": w.jobctlGet(t, id),
				"jobctl jobs get": w.jobctlGetText(t, id), "jobctl jobs list": w.jobctlList(t, id)}
			web, row := w.webRow(t, id)
			views["web view"] = web
			if tc.want.state.Terminal() {
				// A DELETE of a job that ended answers with the job
				// (Cancelled) or the state that refuses it.
				answer, accepted := w.cancel(t, id)
				if !accepted {
					answer = shown{State: answer.State}
					views["DELETE (refused)"] = answer
				} else {
					views["DELETE"] = answer
				}
			}
			ref := views["GET"]
			for name, v := range views {
				if name == "DELETE (refused)" {
					if v.State != ref.State {
						t.Errorf("%s names %s; GET says %s", name, v.State, ref.State)
					}
					continue
				}
				if v != ref {
					t.Errorf("%s disagrees with GET:\n%-22s %+v\n%-22s %+v", name, name, v, "GET", ref)
				}
			}
			got := want{state: jobs.State(ref.State), attempts: ref.Attempts, outcome: ref.LastOutcome, reason: ref.LastReason, claimed: tc.want.claimed}
			if got != tc.want {
				t.Errorf("the job reads %+v; want %+v", got, tc.want)
			}
			updated, err := time.Parse(time.RFC3339Nano, ref.UpdatedAt)
			if err != nil || updated.Location() != time.UTC || !updated.Equal(updated.Truncate(time.Millisecond)) {
				t.Errorf("updatedAt %q is not milliseconds, UTC (%v)", ref.UpdatedAt, err)
			}
			if tc.want.claimed {
				m, ok, err := w.Markers.Peek(ctx, engine.Key{Type: contract.Welcome.Name, JobID: id})
				if err != nil || !ok || !updated.Equal(m.ProcessedAt.Truncate(time.Millisecond)) {
					t.Errorf("updatedAt %s; want the claim's time %s (%v %v)", ref.UpdatedAt, m.ProcessedAt.Format(time.RFC3339Nano), ok, err)
				}
			}
			for _, want := range []string{">" + ref.State + "<", `<td class="num">` + strconv.Itoa(ref.Attempts) + "<", updated.Format("2006-01-02 15:04:05.000Z")} {
				if !strings.Contains(row, want) {
					t.Errorf("the web row lacks %q:\n%s", want, row)
				}
			}
			if red := strings.Contains(row, `class="reason"`); red != (tc.want.state == jobs.StateFailed) {
				t.Errorf("the web row of a %s job is red: %v; want red only when Failed:\n%s", ref.State, red, row)
			}
		})
	}
}

// A continuation shows in every view: GET and jobctl jobs get|list read it
// AwaitingContinuation, jobs get of its parent lists it with its state, in
// text and JSON; a cancel ends it, and it leaves the parent's list.
func TestContinuationsInEveryView(t *testing.T) {
	w := newViewsWorld(t)
	parent := w.enqueue(t)
	resp := w.call(t, http.MethodPost, "/v1/jobs/"+contract.Welcome.Name, `{"args":{"userId":"u-views-child"},"after":"`+parent+`"}`,
		map[string]string{"idempotency-key": "views-child"})
	var child struct{ JobID, State string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &child) != nil || child.State != string(jobs.StateAwaitingContinuation) {
		t.Fatalf("POST with after: %d %s", resp.StatusCode, resp.Body)
	}
	for name, s := range map[string]shown{"GET": w.get(t, child.JobID), "jobctl jobs get --json": w.jobctlGet(t, child.JobID),
		"jobctl jobs get": w.jobctlGetText(t, child.JobID), "jobctl jobs list": w.jobctlList(t, child.JobID)} {
		if s.State != string(jobs.StateAwaitingContinuation) {
			t.Errorf("%s: the continuation reads %s", name, s.State)
		}
	}
	links := func() []struct{ JobID, State string } {
		code, out, stderr := w.cli("jobs", "get", parent, "--json")
		var got struct {
			Continuations []struct{ JobID, State string } `json:"continuations"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("jobs get --json: exit %d %s %s", code, out, stderr)
		}
		return got.Continuations
	}
	if l := links(); len(l) != 1 || l[0].JobID != child.JobID || l[0].State != string(jobs.StateAwaitingContinuation) {
		t.Fatalf("the parent's continuations: %+v", l)
	}
	if code, out, _ := w.cli("jobs", "get", parent); code != exitOK || !strings.Contains(out, child.JobID+" (AwaitingContinuation)") {
		t.Fatalf("jobs get of the parent, as text: exit %d\n%s", code, out)
	}
	if code, out, _ := w.cli("jobs", "get", child.JobID); code != exitOK || !regexp.MustCompile(`(?m)^after\s+`+parent+`$`).MatchString(out) {
		t.Fatalf("jobs get of the continuation names no parent:\n%s", out)
	}
	if s, ok := w.cancel(t, child.JobID); !ok || s.State != string(jobs.StateCancelled) {
		t.Fatalf("cancel the continuation: %+v %t", s, ok)
	}
	// A cancelled continuation no longer waits: it leaves its parent's
	// list (and frees its place of MaxContinuations).
	if l := links(); len(l) != 0 {
		t.Fatalf("the parent's continuations after the cancel: %+v; want none", l)
	}
}
