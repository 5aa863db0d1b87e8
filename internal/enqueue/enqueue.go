package enqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/apigw"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// post validates a POST /v1/jobs/{type} and runs it under the request
// layer (keyed). Validation failures return a problem before anything is
// stored.
func (h *Handler) post(w http.ResponseWriter, r *http.Request, c *call) *Problem {
	ctx, log, typeName := r.Context(), c.log, apigw.PathValue(r, "type")
	jt, err := h.Registry.Lookup(typeName)
	if err != nil {
		detail := "unknown job type " + contract.Printable(typeName)
		if near, ok := h.Registry.Nearest(typeName); ok {
			detail += "; did you mean " + near + "?"
		} else {
			detail += "; the job types are " + strings.Join(h.Registry.Names(), ", ")
		}
		return newProblem(http.StatusNotFound, ProblemUnknownType, detail)
	}
	log = log.With(obs.KeyType, jt.Name)
	if p := scheduledOnly(jt); p != nil {
		return p
	}
	body, idemKey, p := keyedBody(r, MaxBodyBytes, "the body", "name this request, e.g. Idempotency-Key: signup-u-123-2026-11-30")
	if p != nil {
		return p
	}
	in, err := contract.DecodeBodyAt(jt, body, h.now())
	if err != nil {
		return invalidProblem(log, "decode", "the body", err)
	}
	if strings.HasPrefix(in.After, "#") {
		return validation("after", "names a job of the same batch ("+contract.Printable(in.After)+
			"), which only POST /v1/batches takes; give the jobId of the job this one waits for")
	}
	route := jobsPrefix + jt.Name
	fp, err := idempotency.Fingerprint(http.MethodPost, route, body)
	if err != nil {
		return validation("body", "is not valid JSON")
	}
	trace := traceHeader(ctx, r.Header)
	ctx = nameJob(ctx, message.DeriveMessageID(c.caller, idemKey), jt.Name) // every span of the request names its job
	h.keyed(w, r.WithContext(ctx), c, keyedRequest{key: idemKey, route: route, body: body, keep: keepsJob},
		func(ctx context.Context, lock idempotency.Lock) (reply, bool) {
			return h.enqueue(ctx, log, lockKeeper{h: h, lock: lock, floor: lifetime.StoredAnswer}, jt, in, c.caller, idemKey, fp, c.corr, trace)
		})
	return nil
}

// keeper keeps an enqueue's answer under the request's lock, which the
// request layer replays. With promote set, the job's promotion (Pending to
// its queued state) is committed with it. due is the run time of the job
// the answer is about (zero for none): the answer is kept at least until
// that job's last delivery (lifetime.Until), so a retry of the request can
// never make a second job while the first can still run.
type keeper interface {
	keep(ctx context.Context, resp idempotency.Response, due time.Time, promote *jobs.Job) error
}

// lockKeeper stores the answer under the request's lock, the promotion in
// the same transaction, for floor at least: a day for an HTTP request, as
// long as an outbox item can be relayed again for the relay's.
type lockKeeper struct {
	h     *Handler
	lock  idempotency.Lock
	floor time.Duration
}

func (k lockKeeper) keep(ctx context.Context, resp idempotency.Response, due time.Time, promote *jobs.Job) error {
	resp.KeepUntil = lifetime.Until(k.h.now(), due, k.floor)
	if promote == nil {
		return k.h.Idempotency.Complete(ctx, k.lock, resp)
	}
	return k.h.Idempotency.Complete(ctx, k.lock, resp, k.h.Jobs.Promotion(*promote))
}

// scheduledOnly refuses a tick type (a recurring schedule's, such as the
// weekly digest fan-out): its jobs are made by its schedule's ticks, for
// caller schedule:<name>, never by a request; and a type runstwice makes
// for itself (contract.Internal).
func scheduledOnly(jt message.JobType) *Problem {
	if contract.Internal(jt.Name) {
		return validation("path type", "is one runstwice makes for itself, never enqueued")
	}
	if jt.TickArgs == nil {
		return nil
	}
	return validation("path type", "is started by its recurring schedule only, not enqueued: send a tick with "+
		"`jobctl schedules trigger NAME` to run it now")
}

func validation(field, reason string) *Problem {
	p := newProblem(http.StatusBadRequest, ProblemValidation, field+" "+reason)
	p.Errors = []message.FieldError{{Field: field, Reason: reason}}
	return p
}

// runOnce runs do under the request layer, its lock taken over with
// TakeOver (the outbox relay's way in): a replay, a mismatch or a request
// in flight never calls it. do returns the response and whether it is
// stored under the key; when it is not (a 5xx, a transient conflict) and
// do did not finish the lock itself, the lock is released so the key stays
// usable.
func (h *Handler) runOnce(ctx context.Context, log *slog.Logger, caller, key, fp, corr string,
	do func(idempotency.Lock) (reply, bool),
) (reply, *Problem) {
	res, err := h.Idempotency.TakeOver(ctx, caller, key, fp)
	if err != nil {
		log.Error("enqueue: idempotency begin", obs.KeyError, obs.Redact(err))
		return unavailable(corr), nil
	}
	switch res.Outcome {
	case idempotency.Replay:
		r := res.Response
		hdr := make(map[string]string, len(r.Headers)+1)
		for k, v := range r.Headers {
			hdr[k] = v
		}
		hdr[HeaderReplayed] = "true"
		return reply{StatusCode: r.Status, Headers: hdr, Body: r.Body}, nil
	case idempotency.Mismatch:
		return reply{}, keyMismatch()
	case idempotency.InFlight:
		return reply{}, inFlight(res.RetryAfter)
	}
	resp, store := do(res.Lock)
	if !store {
		if err := h.Idempotency.Release(ctx, res.Lock); err != nil {
			log.Warn("enqueue: release idempotency lock", obs.KeyError, obs.Redact(err))
		}
	}
	return resp, nil
}

// accepted is the body of a 202 or 200 answer to an enqueue.
type accepted struct {
	JobID         string     `json:"jobId"`
	Type          string     `json:"type"`
	State         jobs.State `json:"state"`
	Key           string     `json:"key"`
	Deduplicated  bool       `json:"deduplicated"`
	CorrelationID string     `json:"correlationId"`
}

func jobResponse(status int, job jobs.Job, state jobs.State, dedup bool, corr string) idempotency.Response {
	return idempotency.Response{
		Status: status,
		Headers: map[string]string{
			HeaderContentType: ContentTypeJSON, HeaderLocation: jobsPrefix + job.ID, HeaderCorrelationID: corr,
		},
		Body: mustJSON(accepted{JobID: job.ID, Type: job.Type, State: state, Key: job.Key, Deduplicated: dedup, CorrelationID: job.CorrelationID}),
	}
}

func toAPI(r idempotency.Response) reply {
	return reply{StatusCode: r.Status, Headers: r.Headers, Body: r.Body}
}

// enqueue is the one place that enqueues a request of caller: it reserves
// the job under the id derived from (caller, idemKey), decides what the
// key's last job and the duplicate policy allow, hands a new job's message
// to SQS or the scheduler, and keeps the answer with keep. The HTTP handler
// calls it under a held request lock, the outbox relay (EnqueueFor) without
// one. It reports whether the answer was kept; if not, runOnce releases the
// lock.
func (h *Handler) enqueue(ctx context.Context, log *slog.Logger, keep keeper, jt message.JobType, in contract.Body,
	caller, idemKey, fingerprint, corr, trace string,
) (reply, bool) {
	id := message.DeriveMessageID(caller, idemKey)
	log = log.With(obs.KeyJobID, id, obs.KeyMessageID, id, obs.KeyKey, in.Key)
	ctx = nameJob(ctx, id, jt.Name)
	job, p := h.newJob(ctx, log, jt, in, caller, id, fingerprint, corr, trace, h.now().UTC())
	if p != nil {
		return p.response(corr), false
	}
	d, err := h.Jobs.Reserve(ctx, job, in.Policy)
	if p := continuationRefused(err, in.After); p != nil {
		return p.response(corr), false
	}
	if err != nil {
		log.Error("enqueue: reserve", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	}
	log.Debug("enqueue: decision", "outcome", d.Outcome.String(), "own", d.Own, "existingJobId", d.Job.ID)
	if d.Own && !sameJob(d.Job, job) {
		// The job id comes from (caller, Idempotency-Key), so a job under
		// this id that is not this request's job means the key was used
		// before for another request whose record is gone (it expired, or
		// that request failed before it was stored).
		return newProblem(http.StatusUnprocessableEntity, ProblemKeyMismatch,
			"this Idempotency-Key was already used for a different job; use a new key").response(corr), false
	}
	if d.Own && d.Job.Stored() == jobs.StateAwaitingContinuation {
		return h.awaitAndFinish(ctx, log, keep, d, corr)
	}
	if d.Own && d.Outcome == jobs.Reserved && d.Job.Stored() == jobs.StateCancelled {
		// Made Cancelled, with the reason, by its parent: an outbox
		// child of another caller's job. It is answered, never sent.
		log.Info("enqueue: continuation refused by its parent", "after", job.After, obs.KeyReason, d.Job.LastReason)
		return h.finish(ctx, log, keep, jobResponse(http.StatusAccepted, d.Job, d.Job.State, false, corr), time.Time{}, corr)
	}
	switch d.Outcome {
	case jobs.Reserved, jobs.Resume:
		return h.sendAndFinish(ctx, log, keep, d, corr)
	case jobs.Duplicate:
		status := http.StatusOK
		if d.Own {
			status = http.StatusAccepted
		}
		return h.finish(ctx, log, keep, jobResponse(status, d.Job, d.Job.State, !d.Own, corr), answerDue(d.Job), corr)
	case jobs.Rejected:
		p := newProblem(http.StatusConflict, ProblemDuplicate, fmt.Sprintf(
			"job %s with key %q is %s and duplicatePolicy %s rejects a new one", d.Job.ID, d.Job.Key, d.Job.State, in.Policy))
		p.ExistingJobID, p.Policy, p.CorrelationID = d.Job.ID, string(in.Policy), corr
		r := p.response(corr)
		return h.finish(ctx, log, keep, idempotency.Response{Status: r.StatusCode, Headers: r.Headers, Body: r.Body}, time.Time{}, corr)
	case jobs.Busy:
		p := newProblem(http.StatusConflict, ProblemInFlight, "another request is creating a job with this key; retry later")
		p.retryAfter = d.RetryAfter
		return p.response(corr), false
	}
	log.Error("enqueue: unknown decision", "outcome", int(d.Outcome))
	return newProblem(http.StatusInternalServerError, ProblemInternal, "internal error").response(corr), false
}

// hand gives the message of job to what holds it until it is due: SQS,
// with a delay, when it is due within jobs.MaxQueueDelay of now; else a
// one-time schedule, which sends it to its queue when it is due. The delay
// is measured now, after the lock and the reservation, and the queue sends
// it rounded up to whole seconds (sqsqueue.DelaySeconds), as the scheduler
// path rounds its at() up: the job never runs before its runAt. Each is
// done inside its PRODUCER span when the API traces; a scheduled job's
// message then carries that span as its traceparent (job.Message is
// updated, and its promotion stores it). What failed is named in the error
// for the 503's detail.
func (h *Handler) hand(ctx context.Context, job *jobs.Job) (what string, err error) {
	wait := max(job.RunAt.Sub(h.now()), 0)
	if wait <= jobs.MaxQueueDelay {
		ctx, header, span := h.producerSpan(ctx, *job)
		err := h.Queue.Send(ctx, sqsqueue.Message{
			Queue: job.Queue, Body: job.Message, Type: job.Type, CorrelationID: job.CorrelationID, Delay: wait,
			TraceHeader: header,
		})
		endSpan(span, err)
		return "the job queue", err
	}
	if h.Schedules == nil {
		return "the scheduler", errors.New("enqueue: no scheduler configured for a job due later than 15 minutes")
	}
	ctx, span := h.scheduleSpan(ctx, job)
	err = h.Schedules.Create(ctx, schedule.Job{ID: job.ID, Queue: message.Queue(job.Queue), Body: job.Message, RunAt: job.RunAt})
	endSpan(span, err)
	return "the scheduler", err
}

// sendAndFinish hands the message of a reserved or pending job to SQS or
// the scheduler and then, in one transaction, promotes the job and stores
// the response. When the hand-over fails the job stays Pending (no record
// claims it is queued or scheduled) and the key stays retryable: the retry
// resumes the same job id, and a schedule that an earlier try did create
// counts as created.
func (h *Handler) sendAndFinish(ctx context.Context, log *slog.Logger, keep keeper, d jobs.Decision, corr string) (reply, bool) {
	job := d.Job
	if what, err := h.hand(ctx, &job); err != nil {
		return h.handFailed(log, job, what, err).response(corr), false
	}
	status, dedup := http.StatusAccepted, false
	if !d.Own {
		status, dedup = http.StatusOK, true
	}
	resp := jobResponse(status, job, job.QueuedState(), dedup, corr)
	err := keep.keep(ctx, resp, answerDue(job), &job)
	if errors.Is(err, idempotency.ErrCompanionFailed) {
		// The record left the states it is promoted from between the send
		// and now (it was cancelled, or failed): the answer, stored and
		// replayed for as long as the key lives, tells the job as it is,
		// never "Enqueued".
		if cur, gerr := h.Jobs.Get(ctx, job.ID); gerr == nil {
			resp = jobResponse(status, job, cur.State, dedup, corr)
			if cur.State == jobs.StateCancelled {
				h.dropSchedule(ctx, log, job)
			}
		}
		err = keep.keep(ctx, resp, answerDue(job), nil)
	}
	switch {
	case errors.Is(err, idempotency.ErrLockLost):
		log.Warn("enqueue: lock lost; the request that took over answers the same", obs.KeyError, obs.Redact(err))
		return toAPI(resp), true
	case err != nil:
		// The message is in SQS but neither record says so. A retry with the
		// same key sends the same message id again, which the marker absorbs.
		log.Error("enqueue: complete after send", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	}
	log.Info("enqueue: job queued", "status", status, "state", string(job.QueuedState()))
	return toAPI(resp), true
}

// answerDue is the run time the stored answer about job must outlive: a
// job that waits in a one-time schedule keeps its answer until its last
// delivery (a retry of the request a year on still replays); any other
// job's answer lives its day (its record, which keeps the request's
// fingerprint, answers a later retry).
func answerDue(job jobs.Job) time.Time {
	if !job.MayHaveSchedule() {
		return time.Time{}
	}
	return job.Due()
}

// dropSchedule deletes the one-time schedule this enqueue just created for
// job, whose cancel landed between its reservation and its schedule: the
// cancel found no schedule to delete, so the enqueue deletes its own. When
// that fails too, the schedule sweep does it (the job stays on its list),
// and until then the job's tombstone drops its firing.
func (h *Handler) dropSchedule(ctx context.Context, log *slog.Logger, job jobs.Job) {
	if !job.MayHaveSchedule() {
		return
	}
	if err := h.Jobs.DropSchedule(ctx, job); err != nil {
		log.Warn("enqueue: the job was cancelled while its schedule was made, and the schedule could not be deleted; the schedule sweep deletes it",
			obs.KeyError, obs.Redact(err))
		return
	}
	log.Info("enqueue: the job was cancelled while its schedule was made; its schedule is deleted")
}

// finish keeps resp (under the request's key, for the job due at due) and
// returns it.
func (h *Handler) finish(ctx context.Context, log *slog.Logger, keep keeper, resp idempotency.Response, due time.Time, corr string) (reply, bool) {
	err := keep.keep(ctx, resp, due, nil)
	if err != nil && !errors.Is(err, idempotency.ErrLockLost) {
		log.Error("enqueue: complete", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	}
	return toAPI(resp), true
}

// traceHeader is the X-Ray trace header of the request: the Lambda
// invocation's (whose segment is then the parent), else the X-Amzn-Trace-Id
// header API Gateway (or the local stack) passed on; "" when untraced.
func traceHeader(ctx context.Context, h http.Header) string {
	if t := obs.TraceHeader(ctx); obs.TraceRoot(t) != "" {
		return t
	}
	if t := headerValue(h, "X-Amzn-Trace-Id"); obs.TraceRoot(t) != "" {
		return t
	}
	return ""
}

// sqsTraceHeader is the AWSTraceHeader that carries a job's trace to its
// worker.
func sqsTraceHeader(traceID string) string {
	if traceID == "" {
		return ""
	}
	return "Root=" + traceID
}
