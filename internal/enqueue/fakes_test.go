package enqueue_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/attribute"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/schedule"
)

// world is an in-memory request layer, jobs table and queue: fakes of the
// handler's own ports, with the semantics of the DynamoDB and SQS adapters.
type world struct {
	mu       sync.Mutex
	now      time.Time
	requests map[string]*fakeRequest
	jobs     map[string]jobs.Job
	pointers map[string]string
	sent     []sqsqueue.Message
	sendErr  error
	// onSend runs after a message was sent (outside the world's lock): what
	// happens to the job between its send and its promotion.
	onSend func(sqsqueue.Message)
	owners int
	// schedules are the one-time schedules created, by job id;
	// scheduleErr fails every create, deleteErr every delete; onCreate
	// runs before a create (outside the world's lock): what happens to the
	// job between its reservation and its schedule.
	schedules map[string]schedule.Job
	// beginJob is the job the last Begin's context named (its spans').
	beginJob    []attribute.KeyValue
	scheduleErr error
	deleteErr   error
	onCreate    func(schedule.Job)
}

type fakeRequest struct {
	fp, owner   string
	lockedUntil time.Time
	resp        *idempotency.Response
}

func newWorld() *world {
	return &world{
		now:      time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		requests: map[string]*fakeRequest{}, jobs: map[string]jobs.Job{}, pointers: map[string]string{},
		schedules: map[string]schedule.Job{},
	}
}

func (w *world) Now() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }

func (w *world) advance(d time.Duration) { w.mu.Lock(); w.now = w.now.Add(d); w.mu.Unlock() }

func (w *world) Begin(ctx context.Context, caller, key, fp string) (idempotency.Result, error) {
	w.mu.Lock()
	w.beginJob = engine.TracedJobAttributes(ctx)
	w.mu.Unlock()
	return w.begin(caller, key, fp, false)
}

// TakeOver plays idempotency.Store.TakeOver: a lock in flight is taken
// over at once.
func (w *world) TakeOver(_ context.Context, caller, key, fp string) (idempotency.Result, error) {
	return w.begin(caller, key, fp, true)
}

func (w *world) begin(caller, key, fp string, takeOver bool) (idempotency.Result, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pk := idempotency.PK(caller, key)
	if r, ok := w.requests[pk]; ok {
		switch {
		case r.fp != fp:
			return idempotency.Result{Outcome: idempotency.Mismatch}, nil
		case r.resp != nil:
			return idempotency.Result{Outcome: idempotency.Replay, Response: *r.resp}, nil
		case r.lockedUntil.After(w.now) && !takeOver:
			return idempotency.Result{Outcome: idempotency.InFlight, RetryAfter: r.lockedUntil.Sub(w.now)}, nil
		}
	}
	w.owners++
	lock := idempotency.Lock{PK: pk, Owner: strings.Repeat("o", w.owners), Fingerprint: fp, LockedUntil: w.now.Add(idempotency.DefaultLockTimeout)}
	w.requests[pk] = &fakeRequest{fp: fp, owner: lock.Owner, lockedUntil: lock.LockedUntil}
	return idempotency.Result{Outcome: idempotency.Acquired, Lock: lock}, nil
}

// Keys plays idempotency.Store.Keys: the world's requests as the
// engine.Store the Idempotency-Key middleware runs on.
func (w *world) Keys(string) engine.Store { return worldKeys{w} }

// worldKeys is the world's requests as an engine.Store, with the rules of
// idempotency.Keys: a lease is a request's lock, a claim its answer.
type worldKeys struct{ w *world }

// keyedResponse is a response as the middleware keeps it.
type keyedResponse struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

func worldPK(k engine.Key) string {
	caller, key, _ := strings.Cut(k.JobID, "\x00")
	return idempotency.PK(caller, key)
}

// record is the engine's view of request r.
func (r *fakeRequest) record(k engine.Key) engine.Record {
	if r.resp == nil {
		return engine.Record{Key: k, State: engine.StateLeased, Owner: r.owner, LeaseUntil: r.lockedUntil, Fingerprint: r.fp}
	}
	kr := keyedResponse{Status: r.resp.Status, Body: []byte(r.resp.Body), Header: map[string][]string{}}
	for h, v := range r.resp.Headers {
		kr.Header[h] = []string{v}
	}
	b, _ := json.Marshal(kr)
	return engine.Record{Key: k, State: engine.StateDone, Owner: r.owner, Fingerprint: r.fp, Result: b}
}

func (s worldKeys) PeekBatch(_ context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	out := map[engine.Key]engine.Record{}
	for _, k := range keys {
		if r, ok := s.w.requests[worldPK(k)]; ok {
			out[k] = r.record(k)
		}
	}
	return out, nil
}

func (s worldKeys) Lease(ctx context.Context, k engine.Key, m engine.Mark) (engine.Record, error) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.beginJob = engine.TracedJobAttributes(ctx)
	pk := worldPK(k)
	if r, ok := w.requests[pk]; ok && r.owner != m.Owner {
		switch {
		case r.resp != nil:
			return r.record(k), engine.ErrProcessed
		case r.lockedUntil.After(w.now) || (m.Fingerprint != "" && r.fp != m.Fingerprint):
			return r.record(k), engine.ErrLeaseHeld
		}
	}
	w.requests[pk] = &fakeRequest{fp: m.Fingerprint, owner: m.Owner, lockedUntil: m.Until}
	return w.requests[pk].record(k), nil
}

func (s worldKeys) Claim(_ context.Context, k engine.Key, m engine.Mark) (bool, error) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.requests[worldPK(k)]
	switch {
	case ok && r.resp != nil:
		return r.owner == m.Owner, nil
	case ok && r.owner != m.Owner:
		return false, engine.ErrLeaseLost
	}
	var kr keyedResponse
	if err := json.Unmarshal(m.Result, &kr); err != nil {
		return false, err
	}
	resp := idempotency.Response{Status: kr.Status, Body: string(kr.Body), Headers: map[string]string{}}
	for h, v := range kr.Header {
		resp.Headers[h] = strings.Join(v, ",")
	}
	w.requests[worldPK(k)] = &fakeRequest{fp: m.Fingerprint, owner: m.Owner, resp: &resp}
	return true, nil
}

func (s worldKeys) Fail(context.Context, engine.Key, engine.Mark) error {
	return errors.New("the world's requests never fail")
}

func (s worldKeys) Release(_ context.Context, k engine.Key, owner string) error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if r, ok := s.w.requests[worldPK(k)]; ok && r.owner == owner && r.resp == nil {
		delete(s.w.requests, worldPK(k))
	}
	return nil
}

func (w *world) Complete(_ context.Context, lock idempotency.Lock, resp idempotency.Response, with ...idempotency.Companion) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.requests[lock.PK]
	if !ok || r.owner != lock.Owner || r.resp != nil {
		return idempotency.ErrLockLost
	}
	for _, c := range with {
		p := c.(promotion).job
		j, ok := w.jobs[p.ID]
		if !ok || j.State == jobs.StateFailed || j.State == jobs.StateCancelled {
			return idempotency.ErrCompanionFailed
		}
		j.State = j.QueuedState()
		if p.Message != "" {
			j.Message = p.Message
		}
		w.jobs[j.ID] = j
	}
	r.resp = &resp
	return nil
}

func (w *world) Release(_ context.Context, lock idempotency.Lock) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.requests[lock.PK]; ok && r.owner == lock.Owner && r.resp == nil {
		delete(w.requests, lock.PK)
	}
	return nil
}

func (w *world) Reserve(_ context.Context, job jobs.Job, policy contract.DuplicatePolicy) (jobs.Decision, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ppk := jobs.DedupPK(job.Caller, job.Type, job.Key)
	if id, ok := w.pointers[ppk]; ok {
		prev := w.jobs[id]
		own := prev.ID == job.ID
		switch {
		case prev.State == jobs.StatePending && !own && w.now.Before(prev.CreatedAt.Add(jobs.DefaultPendingTimeout)):
			return jobs.Decision{Outcome: jobs.Busy, Job: prev, RetryAfter: time.Second}, nil
		case prev.State == jobs.StatePending:
			return jobs.Decision{Outcome: jobs.Resume, Job: prev, Own: own}, nil
		case own || prev.State.Active():
			return jobs.Decision{Outcome: jobs.Duplicate, Job: prev, Own: own}, nil
		case !jobs.Allows(policy, prev.State):
			return jobs.Decision{Outcome: jobs.Rejected, Job: prev}, nil
		}
	}
	job.State = jobs.StatePending
	w.jobs[job.ID] = job
	w.pointers[ppk] = job.ID
	return jobs.Decision{Outcome: jobs.Reserved, Job: job, Own: true}, nil
}

func (w *world) Get(_ context.Context, id string) (jobs.Job, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok := w.jobs[id]
	if !ok {
		return jobs.Job{}, jobs.ErrNotFound
	}
	return j, nil
}

// promotion is the fake's companion write: promote the job, storing its
// message as it was handed over.
type promotion struct{ job jobs.Job }

func (promotion) TransactItem() (types.TransactWriteItem, error) {
	return types.TransactWriteItem{}, nil
}

func (w *world) Promotion(job jobs.Job) idempotency.Companion { return promotion{job} }

// Promote plays jobs.Store.Promote: a job that left the states it is
// promoted from is left as it is.
func (w *world) Promote(_ context.Context, job jobs.Job) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok := w.jobs[job.ID]
	if !ok || j.State == jobs.StateFailed || j.State == jobs.StateCancelled {
		return nil
	}
	j.State = j.QueuedState()
	w.jobs[j.ID] = j
	return nil
}

// Cancel plays jobs.Store.Cancel on the world's records.
func (w *world) Cancel(_ context.Context, id, caller string) (jobs.Job, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok := w.jobs[id]
	switch {
	case !ok || j.Caller != caller:
		return jobs.Job{}, jobs.ErrNotFound
	case j.State == jobs.StateCancelled:
		return j, nil
	case j.State.Terminal() || j.State == jobs.StateProcessing:
		return j, jobs.ErrConflict
	}
	j.State = jobs.StateCancelled
	w.jobs[id] = j
	return j, nil
}

func (w *world) Send(_ context.Context, m sqsqueue.Message) error {
	w.mu.Lock()
	if w.sendErr != nil {
		w.mu.Unlock()
		return w.sendErr
	}
	w.sent = append(w.sent, m)
	hook := w.onSend
	w.mu.Unlock()
	if hook != nil {
		hook(m)
	}
	return nil
}

// Create plays schedule.Scheduler.Create: a schedule that exists is
// success, and stays as it was.
func (w *world) Create(_ context.Context, j schedule.Job) error {
	if w.onCreate != nil {
		w.onCreate(j)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.scheduleErr != nil {
		return w.scheduleErr
	}
	if _, ok := w.schedules[j.ID]; !ok {
		w.schedules[j.ID] = j
	}
	return nil
}

// DropSchedule plays jobs.Store.DropSchedule: a schedule that is gone is
// no error.
func (w *world) DropSchedule(_ context.Context, j jobs.Job) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deleteErr != nil {
		return w.deleteErr
	}
	delete(w.schedules, j.ID)
	return nil
}

// ReleaseContinuations: the world holds no continuations (their rules are
// the jobs store's, tested on moto in continuation_integration_test.go).
func (w *world) ReleaseContinuations(context.Context, string, jobs.SendFunc) (jobs.ReleaseReport, error) {
	return jobs.ReleaseReport{}, nil
}

// storedAnswer is the answer the request layer keeps for (caller, key).
func (w *world) storedAnswer(caller, key string) (idempotency.Response, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.requests[idempotency.PK(caller, key)]
	if !ok || r.resp == nil {
		return idempotency.Response{}, false
	}
	return *r.resp, true
}

// forget drops the request layer's record of (caller, key), as its expiry
// does.
func (w *world) forget(caller, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.requests, idempotency.PK(caller, key))
}

func (w *world) schedule(id string) (schedule.Job, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok := w.schedules[id]
	return j, ok
}

func (w *world) setState(id string, s jobs.State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.jobs[id]
	j.State = s
	w.jobs[id] = j
}

func (w *world) messages() []sqsqueue.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]sqsqueue.Message(nil), w.sent...)
}

var errQueueDown = errors.New("queue down")

// List is GET /v1/jobs on the fake: the caller's jobs, newest first; its
// cursor is the caller and the index of the next job.
func (w *world) List(_ context.Context, q jobs.ListQuery) (jobs.ListPage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var all []jobs.Job
	for _, j := range w.jobs {
		if j.Caller == q.Caller && (q.Type == "" || j.Type == q.Type) && (q.State == "" || j.State == q.State) {
			all = append(all, j)
		}
	}
	slices.SortFunc(all, func(a, b jobs.Job) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	from := 0
	if q.Cursor != "" {
		caller, at, ok := strings.Cut(q.Cursor, "|")
		n, err := strconv.Atoi(at)
		if !ok || err != nil || caller != q.Caller || n < 0 || n > len(all) {
			return jobs.ListPage{}, jobs.ErrBadCursor
		}
		from = n
	}
	limit := cmp.Or(q.Limit, jobs.DefaultListLimit)
	to := min(from+limit, len(all))
	page := jobs.ListPage{Jobs: all[from:to]}
	if to < len(all) {
		page.Next = q.Caller + "|" + strconv.Itoa(to)
	}
	return page, nil
}
