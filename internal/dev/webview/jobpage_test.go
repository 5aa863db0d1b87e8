package webview

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/operate"
)

const jobID = "7b0f7c1e-5d2a-5c55-9d43-2f4b8a7c9e11"

// jobAt is a job in state s, made an hour before t0 and due an hour after.
func jobAt(s string) Job {
	return Job{ID: jobID, Type: "email.welcome.v1", Key: "welcome:u-1", State: s, Queue: "default", Caller: "local-user",
		CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0.Add(-time.Minute), RunAt: t0.Add(time.Hour)}
}

// post sends a same-origin form POST, as the page's own form does.
func post(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return do(t, h, req)
}

// The page offers each action only in a state that allows it; the others
// are shown, disabled, with why.
func TestJobPageOffersTheActionsItsStateAllows(t *testing.T) {
	for _, tc := range []struct {
		state string
		want  []Action
	}{
		{"Scheduled", []Action{ActionRunNow, ActionCancel}},
		{"AwaitingContinuation", []Action{ActionCancel}},
		{"Enqueued", []Action{ActionCancel}},
		{"Parked", []Action{ActionCancel}},
		{"Processing", nil},
		{"Succeeded", nil},
		{"Failed", []Action{ActionRedrive}},
		{"Cancelled", nil},
	} {
		t.Run(tc.state, func(t *testing.T) {
			h := New(Sources{Job: fakeJobReader{jobID: jobAt(tc.state)}, Operator: &fakeOperator{}}, quietOptions())
			code, body := get(t, h, "/_local/jobs/"+jobID)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			for _, a := range []Action{ActionRunNow, ActionCancel, ActionRedrive} {
				link := `href="/_local/jobs/` + jobID + `/` + string(a) + `"`
				if got, want := strings.Contains(body, link), slices.Contains(tc.want, a); got != want {
					t.Errorf("%s: link to %s shown %t; want %t", tc.state, a, got, want)
				}
				if !strings.Contains(body, `data-action="`+string(a)+`"`) {
					t.Errorf("%s: %s not on the page at all (a disabled one says why)", tc.state, a)
				}
				// A disabled action says why beside its button, in words
				// a reader sees (not only on hover), naming the state.
				why := regexp.MustCompile(`data-action="` + string(a) + `" aria-disabled="true">[^<]*</span> <span class="note why">([^<]+)</span>`).FindStringSubmatch(body)
				if disabled := !slices.Contains(tc.want, a); disabled != (why != nil) {
					t.Errorf("%s: %s disabled %t, a reason beside it %q", tc.state, a, disabled, why)
				} else if why != nil && !strings.Contains(why[1], tc.state) && !strings.Contains(strings.ToLower(why[1]), strings.ToLower(tc.state)) {
					t.Errorf("%s: the reason beside %s, %q, does not name the state", tc.state, a, why[1])
				}
			}
			if tc.state == "Scheduled" && !strings.Contains(body, "<th>due</th>") {
				t.Errorf("a scheduled job's page shows no due time")
			}
		})
	}
}

// An action is a GET that asks (no form submits without it), then a POST
// that acts through the Operator and redirects to the page, which says
// once what was done.
func TestActionAsksFirstThenActsAndSaysWhatItDid(t *testing.T) {
	op := &fakeOperator{said: "cancelled; it never runs"}
	h := New(Sources{Job: fakeJobReader{jobID: jobAt("Scheduled")}, Operator: op}, quietOptions())

	code, body := get(t, h, "/_local/jobs/"+jobID+"/cancel")
	if code != http.StatusOK || !strings.Contains(body, `data-confirm="cancel"`) ||
		!strings.Contains(body, `<form method="post" action="/_local/jobs/`+jobID+`/cancel">`) || !strings.Contains(body, "This cannot be undone") {
		t.Fatalf("confirmation page: %d\n%s", code, body)
	}
	if len(op.calls()) != 0 {
		t.Fatalf("asking acted: %v", op.calls())
	}

	rec := post(t, h, "/_local/jobs/"+jobID+"/cancel")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/_local/jobs/"+jobID {
		t.Fatalf("POST: %d %s; want 303 to the job's page", rec.Code, rec.Header().Get("Location"))
	}
	if got := op.calls(); !slices.Equal(got, []act{{ActionCancel, jobID}}) {
		t.Fatalf("operator calls %v; want one cancel", got)
	}
	_, body = get(t, h, "/_local/jobs/"+jobID)
	if !strings.Contains(body, `class="flash done"`) || !strings.Contains(body, "cancel: cancelled; it never runs") {
		t.Fatalf("after the action the page does not say what was done:\n%s", body)
	}
	if _, again := get(t, h, "/_local/jobs/"+jobID); strings.Contains(again, `class="flash`) {
		t.Fatal("the result is shown a second time")
	}

	// Refused by the job's state (the store's answer, as jobctl's exit 4).
	op.err = &operate.RefusedError{Reason: "job " + jobID + " is Succeeded: it can no longer be cancelled"}
	post(t, h, "/_local/jobs/"+jobID+"/cancel")
	if _, body = get(t, h, "/_local/jobs/"+jobID); !strings.Contains(body, `class="flash refused"`) || !strings.Contains(body, "it can no longer be cancelled") {
		t.Fatalf("a refused action is not said:\n%s", body)
	}
}

// A page cannot be made to act: an unknown action is 404, a cross-origin
// POST is refused before the Operator sees it, and asking to confirm an
// action the state forbids shows no form.
func TestActionsRefuseWhatTheyMustNotDo(t *testing.T) {
	op := &fakeOperator{}
	h := New(Sources{Job: fakeJobReader{jobID: jobAt("Succeeded")}, Operator: op}, quietOptions())
	if rec := post(t, h, "/_local/jobs/"+jobID+"/delete-everything"); rec.Code != http.StatusNotFound {
		t.Errorf("unknown action: %d; want 404", rec.Code)
	}
	req := httptest.NewRequest(http.MethodPost, "/_local/jobs/"+jobID+"/cancel", nil)
	req.Header.Set("Origin", "http://evil.example")
	if rec := do(t, h, req); rec.Code != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d; want 403", rec.Code)
	}
	code, body := get(t, h, "/_local/jobs/"+jobID+"/cancel")
	if code != http.StatusOK || strings.Contains(body, `<form method="post"`) || !strings.Contains(body, "a job that is Succeeded cannot cancel") {
		t.Errorf("confirming a forbidden cancel: %d\n%s", code, body)
	}
	if len(op.calls()) != 0 {
		t.Fatalf("the operator was called: %v", op.calls())
	}
	if code, body := get(t, h, "/_local/jobs/no-such-job"); code != http.StatusNotFound || !strings.Contains(body, "no such job") {
		t.Errorf("unknown job: %d", code)
	}
}

// The list links every job to its page by a short id (the full one its
// title), labels a reason's class, and shows a waiting job's due time;
// the navigation names every section.
func TestListLinksShortIDsAndLabelsClasses(t *testing.T) {
	j := jobAt("Scheduled")
	j.LastOutcome, j.LastReason, j.LastErrorClass = "dead-lettered", "no such user", "permanent"
	h := New(Sources{Jobs: &fakeJobs{rows: []Job{j}}}, quietOptions())
	_, body := get(t, h, "/_local/?refresh=0")
	for _, want := range []string{
		`<a class="id" href="/_local/jobs/` + jobID + `" title="` + jobID + `"><code>7b0f7c1e…</code></a>`,
		`<span class="label">error class</span> permanent`,
		`<span class="label">reason</span> no such user`,
		`<span title="2026-11-30 09:00:00.000Z">in 1h</span>`,
		`<a href="#schedules">Schedules</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
}

// The chain section links the job a continuation waits for and the jobs
// that wait for it, with their states and the policy in words; a waiting
// continuation can be cancelled.
func TestJobPageDrawsTheChain(t *testing.T) {
	j := jobAt("AwaitingContinuation")
	j.Chain = Chain{Parent: &Link{ID: "parent-0000-1111", Type: "email.welcome.v1", State: "Processing"}, AfterPolicy: "OnSucceeded",
		Children: []Link{{ID: "child-a-2222-3333", Type: "email.password-reset.v1", State: "AwaitingContinuation"}, {ID: "child-b", Type: "webhook.deliver.v1", State: "Cancelled"}}}
	h := New(Sources{Job: fakeJobReader{jobID: j}, Operator: &fakeOperator{}}, quietOptions())
	code, body := get(t, h, "/_local/jobs/"+jobID)
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{
		`data-parent="parent-0000-1111"`, `href="/_local/jobs/parent-0000-1111"`, "runs after its success, and is cancelled if it ends otherwise",
		`data-children="2"`, `href="/_local/jobs/child-a-2222-3333"`, `<code>child-a-…</code>`, `href="/_local/jobs/child-b"`,
		`state-cancelled">Cancelled`, `href="/_local/jobs/` + jobID + `/cancel"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(body, "this job alone") {
		t.Error("a job in a chain reads alone")
	}
	j.Chain = Chain{}
	if _, body := get(t, New(Sources{Job: fakeJobReader{jobID: j}}, quietOptions()), "/_local/jobs/"+jobID); !strings.Contains(body, "this job alone") {
		t.Error("a job in no chain does not say so")
	}
}
