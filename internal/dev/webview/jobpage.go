package webview

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/operate"
)

// Action is what an operator can do on a job's page.
type Action string

// The actions, as jobctl names them (jobs cancel, jobs run-now, dlq
// redrive).
const (
	ActionCancel  Action = "cancel"
	ActionRunNow  Action = "run-now"
	ActionRedrive Action = "redrive"
)

// actionText is what each action's button and confirmation say.
var actionText = map[Action]struct{ Button, Confirm, Yes string }{
	ActionCancel: {"Cancel…", "Cancel this job? It never runs: its one-time schedule (if it has one) is deleted, " +
		"and every worker that still receives it drops it. This cannot be undone.", "Yes, cancel it"},
	ActionRunNow: {"Run now…", "Run this job now, before its time? Its one-time schedule is deleted and its message " +
		"sent to its queue at once; it still runs once.", "Yes, run it now"},
	ActionRedrive: {"Redrive…", "Redrive this job? Its dead letter goes back to its queue under the same id and the " +
		"job is active again; it runs once more (a copy already done is dropped by its marker).", "Yes, redrive it"},
}

// Available reports whether action applies to the job in its state:
// cancel before it runs (AwaitingContinuation, Pending, Enqueued,
// Scheduled, Parked), run now
// while it waits for its time (Scheduled), redrive once it failed.
func (j Job) Available(action Action) bool {
	switch jobs.State(j.State) {
	case jobs.StateAwaitingContinuation, jobs.StatePending, jobs.StateEnqueued, jobs.StateParked:
		return action == ActionCancel
	case jobs.StateScheduled:
		return action == ActionCancel || action == ActionRunNow
	case jobs.StateFailed:
		return action == ActionRedrive
	}
	return false
}

// Unavailable says why action does not apply to the job in its state
// ("" when it does): the page writes it beside the greyed button.
func (j Job) Unavailable(action Action) string {
	if j.Available(action) {
		return ""
	}
	st := jobs.State(j.State)
	switch action {
	case ActionCancel:
		switch st {
		case jobs.StateProcessing:
			return "it is Processing (running now): a running job is not cancelled"
		case jobs.StateFailed:
			return "it has failed: nothing left to cancel (redrive it, or leave it)"
		}
		return "it has ended (" + j.State + "): only a job that has not run is cancelled"
	case ActionRunNow:
		return "only a Scheduled job waits for its time; this one is " + j.State
	case ActionRedrive:
		if st == jobs.StateSucceeded {
			return "it succeeded: only a Failed job is redriven"
		}
		return "only a Failed job is redriven; this one is " + j.State
	}
	return "not while the job is " + j.State
}

// Actions lists every action, in the order the page shows them.
func (Job) Actions() []Action { return []Action{ActionRunNow, ActionCancel, ActionRedrive} }

// Short is the job id's first eight characters, for a table (the full id is
// its title and its page's address).
func (j Job) Short() string { return shortID(j.ID) }

func shortID(id string) string {
	if len(id) <= 9 {
		return id
	}
	return id[:8] + "…"
}

// Waiting reports that the job waits for its run time (Scheduled, or
// Enqueued with a delay not yet over at now).
func (j Job) Waiting(now time.Time) bool {
	return (j.State == string(jobs.StateScheduled) || j.State == string(jobs.StateEnqueued)) && j.RunAt.After(now)
}

// JobReader reads one job with its history; ok is false when there is no
// such job (or it expired).
type JobReader interface {
	Job(ctx context.Context, id string) (j Job, ok bool, err error)
}

// Operator takes an operator's action on one job and says, in words, what
// it did. An action the job's state forbids returns an
// *operate.RefusedError.
type Operator interface {
	Act(ctx context.Context, action Action, jobID string) (said string, err error)
}

// flash is the result of an action, shown once on the job's page after the
// redirect (post/redirect/get), so the result is never read from the
// address.
type flash struct {
	Action  Action
	Said    string
	Err     string
	Refused bool
}

// flashes holds the results not shown yet, by job id.
type flashes struct {
	mu sync.Mutex
	m  map[string]flash
}

func (f *flashes) put(id string, v flash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]flash{}
	}
	f.m[id] = v
}

func (f *flashes) take(id string) (flash, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[id]
	delete(f.m, id)
	return v, ok
}

// jobPageData is what job.html renders.
type jobPageData struct {
	pageData
	Job   Job
	Found bool
	Err   string
	// Confirm is the action being confirmed ("" on the plain page), with
	// its texts.
	Confirm     Action
	ConfirmText string
	ConfirmYes  string
	Flash       *flash
	CanAct      bool
	// Traced: the stack keeps spans (the waterfall is a link away).
	Traced bool
}

// Button is the label of action's button.
func (jobPageData) Button(a Action) string { return actionText[a].Button }

// jobPage serves GET {prefix}jobs/{id} and, with an action,
// GET {prefix}jobs/{id}/{action}: the page asking to confirm it.
func (h *handler) jobPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d := jobPageData{pageData: pageData{Prefix: h.opts.Prefix, Stage: h.opts.Stage, Now: h.opts.Now(), Title: "job " + shortID(id), NavBase: h.opts.Prefix},
		CanAct: h.src.Operator != nil, Traced: h.src.Traces != nil}
	if h.src.Job == nil {
		http.Error(w, "no job reader is wired", http.StatusNotFound)
		return
	}
	if a := Action(r.PathValue("action")); a != "" {
		t, ok := actionText[a]
		if !ok {
			http.Error(w, "no such action: "+printable(string(a)), http.StatusNotFound)
			return
		}
		d.Confirm, d.ConfirmText, d.ConfirmYes = a, t.Confirm, t.Yes
	}
	j, ok, err := h.src.Job.Job(r.Context(), id)
	switch {
	case err != nil:
		h.opts.Logger.Warn("webview: read job", "jobId", printable(id), "error", err)
		d.Err = err.Error()
	case ok:
		d.Job, d.Found = j, true
	}
	if f, ok := h.flashes.take(id); ok {
		d.Flash = &f
	}
	status := http.StatusOK
	if err == nil && !ok {
		status, d.Job.ID = http.StatusNotFound, id
	}
	if d.Confirm != "" && d.Found && !d.Job.Available(d.Confirm) {
		d.Flash = &flash{Action: d.Confirm, Refused: true, Err: "a job that is " + d.Job.State + " cannot " + strings.ReplaceAll(string(d.Confirm), "-", " ")}
		d.Confirm = ""
	}
	h.render(w, "job.html", status, d)
}

// act serves POST {prefix}jobs/{id}/{action}: it takes the action through
// the Operator (the paths jobctl takes) and redirects to the job's page,
// which says what happened.
func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	id, a := r.PathValue("id"), Action(r.PathValue("action"))
	if _, ok := actionText[a]; !ok {
		http.Error(w, "no such action: "+printable(string(a)), http.StatusNotFound)
		return
	}
	if h.src.Operator == nil {
		http.Error(w, "no operator is wired: the view cannot act on jobs", http.StatusNotFound)
		return
	}
	said, err := h.src.Operator.Act(r.Context(), a, id)
	f := flash{Action: a, Said: said}
	var refused *operate.RefusedError
	switch {
	case errors.As(err, &refused):
		f.Err, f.Refused = refused.Reason, true
	case errors.Is(err, jobs.ErrNotFound):
		f.Err, f.Refused = "no such job", true
	case err != nil:
		h.opts.Logger.Error("webview: "+string(a), "jobId", printable(id), "error", err)
		f.Err = err.Error()
	default:
		h.opts.Logger.Info("webview: "+string(a), "jobId", printable(id), "said", said)
	}
	h.flashes.put(id, f)
	http.Redirect(w, r, h.opts.Prefix+"jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

// render executes one of the view's templates.
func (h *handler) render(w http.ResponseWriter, name string, status int, data any) {
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, name, data); err != nil {
		h.opts.Logger.Error("webview: render", "template", name, "error", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
