// Package enqueue is the HTTP enqueue endpoint of runstwice on API Gateway
// HTTP API (payload v2): POST /v1/jobs/{type} and GET /v1/jobs/{jobId}
// (DESIGN §3).
//
// A POST goes through two idempotency layers. The request layer
// (internal/idempotency) replays the first response to a retried request. The
// enqueue layer (internal/jobs) keeps one job per (caller, type, key) while it
// is active and applies the DuplicatePolicy after it ended. The order of
// writes neither loses nor ghosts a job:
//
//  1. lock the request (IN_PROGRESS, owner, lockedUntil);
//  2. reserve the job: a Pending record and the dedup pointer, in one
//     conditional transaction;
//  3. send the message to SQS under the job id derived from (caller,
//     Idempotency-Key);
//  4. in one transaction, promote the record to Enqueued/Scheduled and store
//     the response under the request's key.
//
// A 202 therefore means the message is in SQS, and no record says Enqueued
// for a message that was not sent. When SQS fails the lock is released and
// the answer is 503: the key stays usable, and its retry sends the same
// message id again (a crash between 3 and 4 does the same once the lock
// expires); the effect marker absorbs a message sent twice.
package enqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/queue"
)

// Requests is the request idempotency layer; *idempotency.Store is one.
type Requests interface {
	Begin(ctx context.Context, caller, key, fingerprint string) (idempotency.Result, error)
	Complete(ctx context.Context, lock idempotency.Lock, resp idempotency.Response, with ...types.TransactWriteItem) error
	Release(ctx context.Context, lock idempotency.Lock) error
}

// Jobs is the jobs table; *jobs.Store is one.
type Jobs interface {
	Reserve(ctx context.Context, job jobs.Job, policy jobs.DuplicatePolicy) (jobs.Decision, error)
	Get(ctx context.Context, jobID string) (jobs.Job, error)
	PromoteItem(job jobs.Job) (types.TransactWriteItem, error)
}

// Queue sends job messages; *queue.Sender is one.
type Queue interface {
	Send(ctx context.Context, m queue.Message) error
}

// Handler serves the enqueue API. Its fields are set once before use.
type Handler struct {
	Registry *contract.Registry
	Requests Requests
	Jobs     Jobs
	Queue    Queue
	// Logger receives one line per request (obs.DefaultLogger() if nil).
	Logger *slog.Logger
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) logger(ctx context.Context) *slog.Logger {
	l := h.Logger
	if l == nil {
		l = obs.DefaultLogger()
	}
	return obs.WithRequest(ctx, l)
}

// Handle serves one API Gateway request. It always returns a response (a
// problem+json for every error) and a nil error, and never panics on any
// input: a bug is answered with 500.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, err error) {
	log := h.logger(ctx)
	corr := ""
	defer func() {
		if r := recover(); r != nil {
			log.Error("enqueue: panic", "panic", fmt.Sprint(r))
			resp, err = newProblem(http.StatusInternalServerError, ProblemInternal, "internal error").response(corr), nil
		}
	}()
	corr, p := correlationID(req.Headers)
	log = log.With(obs.KeyCorrelationID, corr)
	if p == nil {
		resp = h.serve(ctx, log, req, corr)
	} else {
		resp = p.response(corr)
	}
	lvl := slog.LevelInfo
	if resp.StatusCode >= 500 {
		lvl = slog.LevelWarn
	}
	log.Log(ctx, lvl, "enqueue: request", "method", req.RequestContext.HTTP.Method, "path", req.RawPath, "status", resp.StatusCode)
	return resp, nil
}

// correlationID returns the request's X-Correlation-Id, or a new one when it
// has none; an invalid one is a 400.
func correlationID(h map[string]string) (string, *Problem) {
	v, ok := header(h, HeaderCorrelationID)
	if !ok || v == "" {
		return uuid.NewString(), nil
	}
	if !contract.ValidCorrelationID(v) {
		p := newProblem(http.StatusBadRequest, ProblemValidation, "X-Correlation-Id must be 1-128 characters of letters, digits, '.', '_', ':' or '-'")
		p.Errors = []contract.FieldError{{Field: HeaderCorrelationID, Reason: "invalid"}}
		return uuid.NewString(), p
	}
	return v, nil
}

func (h *Handler) serve(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, corr string) events.APIGatewayV2HTTPResponse {
	rt, ok := matchRoute(req)
	if !ok {
		return newProblem(http.StatusNotFound, ProblemNotFound, "no such route; the API has POST /v1/jobs/{type} and GET /v1/jobs/{jobId}").response(corr)
	}
	if rt.method == "" {
		p := newProblem(http.StatusMethodNotAllowed, ProblemMethod, "use POST /v1/jobs/{type} or GET /v1/jobs/{jobId}")
		p.headers = map[string]string{"Allow": "GET, POST"}
		return p.response(corr)
	}
	caller, ok := Caller(req.RequestContext)
	if !ok {
		return newProblem(http.StatusUnauthorized, ProblemUnauthenticated, "the request carries no authenticated caller").response(corr)
	}
	log = log.With("caller", caller)
	if rt.method == http.MethodGet {
		return h.get(ctx, log, caller, rt.param, corr)
	}
	resp, p := h.post(ctx, log, req, caller, rt.param, corr)
	if p != nil {
		return p.response(corr)
	}
	return resp
}

// get serves GET /v1/jobs/{jobId}: the job to its own caller, 404 to anyone
// else.
func (h *Handler) get(ctx context.Context, log *slog.Logger, caller, jobID, corr string) events.APIGatewayV2HTTPResponse {
	if u, err := uuid.Parse(jobID); err != nil || u.String() != jobID {
		p := newProblem(http.StatusBadRequest, ProblemValidation, "jobId must be a lower-case canonical UUID")
		p.Errors = []contract.FieldError{{Field: "jobId", Reason: "must be a lower-case canonical UUID"}}
		return p.response(corr)
	}
	job, err := h.Jobs.Get(ctx, jobID)
	switch {
	case errors.Is(err, jobs.ErrNotFound) || (err == nil && job.Caller != caller):
		return newProblem(http.StatusNotFound, ProblemNotFound, "no job "+jobID).response(corr)
	case err != nil:
		log.Error("enqueue: get job", "error", err, obs.KeyJobID, jobID)
		return unavailable(corr)
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusOK,
		Headers:    map[string]string{HeaderContentType: ContentTypeJSON, HeaderCorrelationID: corr, "Cache-Control": "no-store"},
		Body:       mustJSON(job),
	}
}

func unavailable(corr string) events.APIGatewayV2HTTPResponse {
	p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "a backing service failed; retry with the same Idempotency-Key")
	p.retryAfter = time.Second
	return p.response(corr)
}

// post validates a POST /v1/jobs/{type} and runs it under the request
// layer. Validation failures return a problem before anything is stored.
func (h *Handler) post(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, caller, typeName, corr string) (events.APIGatewayV2HTTPResponse, *Problem) {
	jt, err := h.Registry.Lookup(typeName)
	if err != nil {
		detail := "unknown job type " + printable(typeName)
		if near, ok := h.Registry.Nearest(typeName); ok {
			detail += "; did you mean " + near + "?"
		}
		return events.APIGatewayV2HTTPResponse{}, newProblem(http.StatusNotFound, ProblemUnknownType, detail)
	}
	log = log.With(obs.KeyType, jt.Name)
	body, err := requestBody(req)
	switch {
	case errors.Is(err, errTooLarge):
		return events.APIGatewayV2HTTPResponse{}, newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes))
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, validation("body", "is not valid base64")
	}
	if err := checkContentType(req.Headers); err != nil {
		return events.APIGatewayV2HTTPResponse{}, newProblem(http.StatusUnsupportedMediaType, ProblemMediaType, err.Error())
	}
	rawKey, _ := header(req.Headers, HeaderIdempotencyKey)
	idemKey, err := idempotency.ParseKey(rawKey)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, validation(HeaderIdempotencyKey, err.Error())
	}
	in, err := DecodeRequest(jt, body)
	if err != nil {
		var ve *contract.ValidationError
		if errors.As(err, &ve) {
			p := newProblem(http.StatusBadRequest, ProblemValidation, "the request is invalid: "+ve.Error())
			p.Errors = ve.Fields
			return events.APIGatewayV2HTTPResponse{}, p
		}
		log.Error("enqueue: decode", "error", err)
		return events.APIGatewayV2HTTPResponse{}, newProblem(http.StatusInternalServerError, ProblemInternal, "internal error")
	}
	fp, err := idempotency.Fingerprint(http.MethodPost, jobsPrefix+jt.Name, body)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, validation("body", "is not valid JSON")
	}
	return h.runOnce(ctx, log, caller, idemKey, fp, corr, func(lock idempotency.Lock) (events.APIGatewayV2HTTPResponse, bool) {
		return h.enqueue(ctx, log, lock, jt, in, caller, idemKey, corr)
	})
}

func validation(field, reason string) *Problem {
	p := newProblem(http.StatusBadRequest, ProblemValidation, field+" "+reason)
	p.Errors = []contract.FieldError{{Field: field, Reason: reason}}
	return p
}

// runOnce runs do under the request layer: a replay, a mismatch or a request
// in flight never calls it. do returns the response and whether it is stored
// under the key; when it is not (a 5xx, a transient conflict) and do did not
// finish the lock itself, the lock is released so the key stays usable.
func (h *Handler) runOnce(ctx context.Context, log *slog.Logger, caller, key, fp, corr string,
	do func(idempotency.Lock) (events.APIGatewayV2HTTPResponse, bool),
) (events.APIGatewayV2HTTPResponse, *Problem) {
	res, err := h.Requests.Begin(ctx, caller, key, fp)
	if err != nil {
		log.Error("enqueue: idempotency begin", "error", err)
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
		return events.APIGatewayV2HTTPResponse{StatusCode: r.Status, Headers: hdr, Body: r.Body}, nil
	case idempotency.Mismatch:
		return events.APIGatewayV2HTTPResponse{}, newProblem(http.StatusUnprocessableEntity, ProblemKeyMismatch,
			"this Idempotency-Key was used for a different request; use a new key")
	case idempotency.InFlight:
		p := newProblem(http.StatusConflict, ProblemInFlight, "a request with this Idempotency-Key is still being processed; retry later")
		p.retryAfter = res.RetryAfter
		return events.APIGatewayV2HTTPResponse{}, p
	}
	resp, store := do(res.Lock)
	if !store {
		if err := h.Requests.Release(ctx, res.Lock); err != nil {
			log.Warn("enqueue: release idempotency lock", "error", err)
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

func toAPI(r idempotency.Response) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: r.Status, Headers: r.Headers, Body: r.Body}
}

// enqueue runs the enqueue layer under a held request lock. It reports
// whether it finished the lock (stored a response); if not, runOnce
// releases it.
func (h *Handler) enqueue(ctx context.Context, log *slog.Logger, lock idempotency.Lock, jt contract.JobType, in Request,
	caller, idemKey, corr string,
) (events.APIGatewayV2HTTPResponse, bool) {
	now := h.now().UTC()
	id := contract.DeriveMessageID(caller, idemKey)
	log = log.With(obs.KeyJobID, id)
	env := contract.Envelope{
		V: contract.Version, MessageID: id, Type: jt.Name, Key: in.Key, CorrelationID: corr, Args: in.Args, EnqueuedAt: now,
	}
	body, err := env.Encode()
	if err != nil {
		var ve *contract.ValidationError
		if errors.As(err, &ve) {
			p := newProblem(http.StatusBadRequest, ProblemValidation, "the job message is invalid: "+ve.Error())
			p.Errors = ve.Fields
			return p.response(corr), false
		}
		log.Error("enqueue: encode", "error", err)
		return newProblem(http.StatusInternalServerError, ProblemInternal, "internal error").response(corr), false
	}
	job := jobs.Job{
		ID: id, Caller: caller, Type: jt.Name, Key: in.Key, Queue: string(jt.Queue), CorrelationID: corr,
		Message: string(body), CreatedAt: now, RunAt: now.Add(in.Delay),
	}
	d, err := h.Jobs.Reserve(ctx, job, in.Policy)
	if err != nil {
		log.Error("enqueue: reserve", "error", err)
		return unavailable(corr), false
	}
	log.Debug("enqueue: decision", "outcome", d.Outcome.String(), "own", d.Own, "existingJobId", d.Job.ID)
	if d.Own && !sameJob(d.Job, env) {
		// The job id comes from (caller, Idempotency-Key), so a job under
		// this id that is not this request's job means the key was used
		// before for another request whose record is gone (it expired, or
		// that request failed before it was stored).
		return newProblem(http.StatusUnprocessableEntity, ProblemKeyMismatch,
			"this Idempotency-Key was already used for a different job; use a new key").response(corr), false
	}
	switch d.Outcome {
	case jobs.Reserved, jobs.Resume:
		return h.sendAndFinish(ctx, log, lock, d, corr)
	case jobs.Duplicate:
		status := http.StatusOK
		if d.Own {
			status = http.StatusAccepted
		}
		return h.finish(ctx, log, lock, jobResponse(status, d.Job, d.Job.State, !d.Own, corr), corr)
	case jobs.Rejected:
		p := newProblem(http.StatusConflict, ProblemDuplicate, fmt.Sprintf(
			"job %s with key %q is %s and duplicatePolicy %s rejects a new one", d.Job.ID, d.Job.Key, d.Job.State, in.Policy))
		p.ExistingJobID, p.Policy, p.CorrelationID = d.Job.ID, string(in.Policy), corr
		r := p.response(corr)
		return h.finish(ctx, log, lock, idempotency.Response{Status: r.StatusCode, Headers: r.Headers, Body: r.Body}, corr)
	case jobs.Busy:
		p := newProblem(http.StatusConflict, ProblemInFlight, "another request is creating a job with this key; retry later")
		p.retryAfter = d.RetryAfter
		return p.response(corr), false
	}
	log.Error("enqueue: unknown decision", "outcome", int(d.Outcome))
	return newProblem(http.StatusInternalServerError, ProblemInternal, "internal error").response(corr), false
}

// sendAndFinish sends the message of a reserved or pending job and then, in
// one transaction, promotes the job and stores the response.
func (h *Handler) sendAndFinish(ctx context.Context, log *slog.Logger, lock idempotency.Lock, d jobs.Decision, corr string) (events.APIGatewayV2HTTPResponse, bool) {
	job := d.Job
	delay := min(max(job.RunAt.Sub(h.now()), 0), MaxDelaySeconds*time.Second)
	err := h.Queue.Send(ctx, queue.Message{
		Queue: contract.Queue(job.Queue), Body: job.Message, Type: job.Type, CorrelationID: job.CorrelationID, Delay: delay,
	})
	if err != nil {
		log.Warn("enqueue: send failed; the key stays retryable", "error", err)
		p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "the job queue did not accept the message; retry with the same Idempotency-Key")
		p.retryAfter = time.Second
		return p.response(corr), false
	}
	status, dedup := http.StatusAccepted, false
	if !d.Own {
		status, dedup = http.StatusOK, true
	}
	resp := jobResponse(status, job, job.QueuedState(), dedup, corr)
	promote, err := h.Jobs.PromoteItem(job)
	if err != nil {
		log.Error("enqueue: promote item", "error", err)
		return unavailable(corr), false
	}
	err = h.Requests.Complete(ctx, lock, resp, promote)
	if errors.Is(err, idempotency.ErrCompanionFailed) {
		// The record is no longer Pending/queued (it failed meanwhile): store
		// the response alone.
		err = h.Requests.Complete(ctx, lock, resp)
	}
	switch {
	case errors.Is(err, idempotency.ErrLockLost):
		log.Warn("enqueue: lock lost; the request that took over answers the same", "error", err)
		return toAPI(resp), true
	case err != nil:
		// The message is in SQS but neither record says so. A retry with the
		// same key sends the same message id again, which the marker absorbs.
		log.Error("enqueue: complete after send", "error", err)
		return unavailable(corr), false
	}
	log.Info("enqueue: job queued", "status", status, "state", string(job.QueuedState()))
	return toAPI(resp), true
}

// finish stores resp under the request's key and returns it.
func (h *Handler) finish(ctx context.Context, log *slog.Logger, lock idempotency.Lock, resp idempotency.Response, corr string) (events.APIGatewayV2HTTPResponse, bool) {
	err := h.Requests.Complete(ctx, lock, resp)
	if err != nil && !errors.Is(err, idempotency.ErrLockLost) {
		log.Error("enqueue: complete", "error", err)
		return unavailable(corr), false
	}
	return toAPI(resp), true
}

// sameJob reports whether job (found under the request's job id) is the job
// env describes: same type, natural key and args.
func sameJob(job jobs.Job, env contract.Envelope) bool {
	if job.Type != env.Type || job.Key != env.Key {
		return false
	}
	if job.Message == "" {
		return true
	}
	stored, err := contract.Decode([]byte(job.Message))
	return err == nil && maps.Equal(stored.Args, env.Args)
}
