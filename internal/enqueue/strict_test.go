package enqueue_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
)

// untouchedBatches is a batch table that must not be used: every call is
// recorded and fails.
type untouchedBatches struct {
	mu    sync.Mutex
	calls []string
}

var errUntouched = errors.New("the batch table was used")

func (b *untouchedBatches) called(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, name)
	return errUntouched
}

func (b *untouchedBatches) PutBatch(context.Context, jobs.Batch, time.Time) (jobs.Batch, error) {
	return jobs.Batch{}, b.called("PutBatch")
}
func (b *untouchedBatches) GetBatch(context.Context, string) (jobs.Batch, error) {
	return jobs.Batch{}, b.called("GetBatch")
}
func (b *untouchedBatches) TakeBatch(context.Context, jobs.Batch, string) (jobs.Batch, error) {
	return jobs.Batch{}, b.called("TakeBatch")
}
func (b *untouchedBatches) ReleaseBatch(context.Context, jobs.Batch) error {
	return b.called("ReleaseBatch")
}
func (b *untouchedBatches) BatchAccepted(jobs.Batch) idempotency.Companion {
	_ = b.called("BatchAccepted")
	return nil
}
func (b *untouchedBatches) AcceptBatch(context.Context, jobs.Batch) error {
	return b.called("AcceptBatch")
}
func (b *untouchedBatches) Views(context.Context, []engine.Key) ([]jobs.Job, error) {
	return nil, b.called("Views")
}
func (b *untouchedBatches) Records(context.Context, []string) (map[string]jobs.Job, error) {
	return nil, b.called("Records")
}
func (b *untouchedBatches) Continuations(context.Context, string) ([]string, error) {
	return nil, b.called("Continuations")
}
func (b *untouchedBatches) Holder(context.Context, jobs.Job) (jobs.Job, bool, error) {
	return jobs.Job{}, false, b.called("Holder")
}
func (b *untouchedBatches) ReserveRefused(context.Context, jobs.Job, string) (jobs.Decision, error) {
	return jobs.Decision{}, b.called("ReserveRefused")
}
func (b *untouchedBatches) ReserveNew(context.Context, []jobs.Job) ([]jobs.Job, []int, error) {
	return nil, nil, b.called("ReserveNew")
}

// names reports whether p's errors name field with a reason saying want.
func names(p enqueue.Problem, field, want string) bool {
	for _, f := range p.Errors {
		if f.Field == field && strings.Contains(f.Reason, want) {
			return true
		}
	}
	return false
}

// A request body that says two things (a member twice, at any depth, or a
// name that differs from a known one only in case) is a 400
// validation-failed naming the member, and nothing is made or stored: no
// job, no dedup pointer, no message, no answer under the key, which a
// good request can then use.
func TestBodyThatSaysTwoThingsMakesNothing(t *testing.T) {
	for _, c := range []struct {
		name, body, field, reason string
	}{
		{"args twice", `{"args":{"userId":"u-1"},"args":{"userId":"u-2"}}`, "args", "appears twice"},
		{"userId twice", `{"args":{"userId":"u-1","userId":"u-2"}}`, "args.userId", "appears twice"},
		{"key twice", `{"args":{"userId":"u-1"},"key":"welcome:u-1","key":"welcome:u-2"}`, "key", "appears twice"},
		{"Args for args", `{"Args":{"userId":"u-2"}}`, "Args", "differs from args only in case"},
		{"UserId beside userId", `{"args":{"userId":"u-1","UserId":"u-2"}}`, "args.UserId", "differs from userId only in case"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			resp := call(t, h, post(welcome, "k-two-things", c.body))
			p := checkProblem(t, resp, http.StatusBadRequest)
			if p.Type != enqueue.ProblemTypePrefix+enqueue.ProblemValidation || !names(p, c.field, c.reason) {
				t.Fatalf("problem %s; want validation-failed naming %s (…%s…)", resp.Body, c.field, c.reason)
			}
			if !strings.Contains(p.Detail, c.field) {
				t.Fatalf("detail %q does not name %s", p.Detail, c.field)
			}
			if len(w.requests) != 0 || len(w.jobs) != 0 || len(w.pointers) != 0 || len(w.sent) != 0 {
				t.Fatalf("stored %d requests, %d jobs, %d pointers, %d messages; want nothing", len(w.requests), len(w.jobs), len(w.pointers), len(w.sent))
			}
			// The key was not used: a good request under it makes its job.
			b := mustBody(t, call(t, h, post(welcome, "k-two-things", welcomeU1)), http.StatusAccepted)
			if b.Deduplicated || b.Key != "welcome:u-1" {
				t.Fatalf("then a good request: %+v", b)
			}
		})
	}
}

// The relay's way in refuses such a body as the API does.
func TestRelayedBodyThatSaysTwoThingsIsRefused(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	a := h.EnqueueFor(context.Background(), enqueue.Request{Caller: "outbox:signup", Type: welcome, IdempotencyKey: "k-1",
		Body: []byte(`{"args":{"userId":"u-1","userId":"u-2"}}`)})
	if a.Status != http.StatusBadRequest || a.Problem != enqueue.ProblemValidation || !strings.Contains(a.Detail, "args.userId: appears twice") {
		t.Fatalf("answer %+v; want 400 validation-failed naming args.userId", a)
	}
	if len(w.requests) != 0 || len(w.jobs) != 0 || len(w.pointers) != 0 || len(w.sent) != 0 {
		t.Fatalf("stored %d requests, %d jobs, %d pointers, %d messages; want nothing", len(w.requests), len(w.jobs), len(w.pointers), len(w.sent))
	}
}

// A batch that says two things is refused whole, naming the member, before
// the batch table, the request layer or the queue is touched.
func TestBatchThatSaysTwoThingsMakesNothing(t *testing.T) {
	const job = `{"type":"email.welcome.v1","args":{"userId":"u-1"}}`
	for _, c := range []struct {
		name, body, field, reason string
	}{
		{"JOBS", `{"JOBS":[` + job + `]}`, "JOBS", "differs from jobs only in case"},
		{"jobſ (long s)", `{"jobſ":[` + job + `]}`, "jobſ", "differs from jobs only in case"},
		{"jobs and JOBS", `{"jobs":[` + job + `],"JOBS":[` + job + `]}`, "JOBS", "differs from jobs only in case"},
		{"jobs twice", `{"jobs":[` + job + `],"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-2"}}]}`, "jobs", "appears twice"},
		{"a job with type twice", `{"jobs":[` + job + `,{"type":"email.welcome.v1","type":"email.password-reset.v1","args":{"userId":"u-2"}}]}`,
			"jobs[1].type", "appears twice"},
		{"a job with Type", `{"jobs":[{"Type":"email.welcome.v1","args":{"userId":"u-1"}}]}`, "jobs[0].Type", "differs from type only in case"},
		{"userId twice in a job's args", `{"jobs":[` + job + `,{"type":"email.welcome.v1","args":{"userId":"u-2","userId":"u-3"}}]}`,
			"jobs[1].args.userId", "appears twice"},
		{"args twice in a job", `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"},"args":{"userId":"u-2"}}]}`,
			"jobs[0].args", "appears twice"},
		{"Args in a job", `{"jobs":[{"type":"email.welcome.v1","Args":{"userId":"u-1"}}]}`, "jobs[0].Args", "differs from args only in case"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			bt := &untouchedBatches{}
			h.Batches = bt
			resp := call(t, h, postBatch("b-two-things", c.body))
			p := checkProblem(t, resp, http.StatusBadRequest)
			if p.Type != enqueue.ProblemTypePrefix+enqueue.ProblemValidation || !names(p, c.field, c.reason) {
				t.Fatalf("problem %s; want validation-failed naming %s (…%s…)", resp.Body, c.field, c.reason)
			}
			if len(bt.calls) != 0 || len(w.requests) != 0 || len(w.jobs) != 0 || len(w.pointers) != 0 || len(w.sent) != 0 {
				t.Fatalf("batch table calls %v, %d requests, %d jobs, %d pointers, %d messages; want nothing", bt.calls,
					len(w.requests), len(w.jobs), len(w.pointers), len(w.sent))
			}
		})
	}
}

// The batch's other shapes are still refused as before.
func TestBatchShapeIsChecked(t *testing.T) {
	for _, c := range []struct{ name, body, field string }{
		{"not an object", `[]`, "body"},
		{"not JSON", `{"jobs":`, "body"},
		{"not UTF-8", "{\"jobs\":[{\"type\":\"email.welcome.v1\",\"args\":{\"userId\":\"u-\xff\"}}]}", "body"},
		{"an unknown field", `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"}}],"priority":"high"}`, "priority"},
		{"no jobs", `{}`, "jobs"},
		{"empty jobs", `{"jobs":[]}`, "jobs"},
		{"jobs not an array", `{"jobs":{"type":"email.welcome.v1"}}`, "jobs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			h.Batches = &untouchedBatches{}
			p := checkProblem(t, call(t, h, postBatch("b-shape", c.body)), http.StatusBadRequest)
			if !names(p, c.field, "") {
				t.Fatalf("problem %+v; want it to name %s", p, c.field)
			}
		})
	}
}
