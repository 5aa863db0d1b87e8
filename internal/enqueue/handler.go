// Package enqueue is the HTTP API of runstwice on API Gateway HTTP API
// (payload v2): POST /v1/jobs/{type} enqueues a job, GET /v1/jobs/{jobId}
// shows it to its caller, DELETE /v1/jobs/{jobId} cancels it (docs/api.md).
//
// The files: routes.go matches the routes, caller.go says who is calling,
// body.go decodes and checks a POST body, enqueue.go is the enqueue flow,
// job.go serves GET and DELETE, problem.go renders every error as
// application/problem+json.
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
//     Idempotency-Key), with its delay; a job due later than SQS can delay
//     a message (15 minutes) gets a one-time EventBridge Scheduler schedule
//     instead, named by the job id, that sends the same message when due;
//  4. in one transaction, promote the record to Enqueued/Scheduled and store
//     the response under the request's key.
//
// A 202 therefore means the message is in SQS (or in its schedule), and no
// record says Enqueued or Scheduled for a message that was not handed over.
// When SQS or the scheduler fails the lock is released and the answer is
// 503: the key stays usable, and its retry sends the same message id again
// or finds its schedule made (a crash between 3 and 4 does the same once
// the lock expires); the effect marker absorbs a message sent twice.
package enqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/vclock"
	"github.com/runstwice/runstwice/message"
)

// Idempotency is the request layer; *idempotency.Store is one.
type Idempotency interface {
	Begin(ctx context.Context, caller, key, fingerprint string) (idempotency.Result, error)
	// TakeOver is Begin for a caller whose requests for one key never run
	// at once (the outbox relay's): a lock it meets is a dead request's,
	// taken over at once.
	TakeOver(ctx context.Context, caller, key, fingerprint string) (idempotency.Result, error)
	Complete(ctx context.Context, lock idempotency.Lock, resp idempotency.Response, with ...idempotency.Companion) error
	Release(ctx context.Context, lock idempotency.Lock) error
}

// Jobs is the jobs table; *jobs.Store is one.
type Jobs interface {
	Reserve(ctx context.Context, job jobs.Job, policy contract.DuplicatePolicy) (jobs.Decision, error)
	Get(ctx context.Context, jobID string) (jobs.Job, error)
	Cancel(ctx context.Context, jobID, caller string) (jobs.Job, error)
	Promotion(job jobs.Job) idempotency.Companion
	Promote(ctx context.Context, job jobs.Job) error
	// DropSchedule deletes the one-time schedule of a job that was
	// cancelled while its schedule was made, leaving it to the schedule
	// sweep when the delete fails.
	DropSchedule(ctx context.Context, job jobs.Job) error
	// Release decides the continuations of a job that has ended (sends or
	// cancels each), and leaves them waiting while it has not.
	ReleaseContinuations(ctx context.Context, parentID string, send jobs.SendFunc) (jobs.ReleaseReport, error)
}

// Lister lists a caller's own jobs, newest first; *mine.Lister
// (internal/jobs/mine) is one.
type Lister interface {
	List(ctx context.Context, q jobs.ListQuery) (jobs.ListPage, error)
}

// Queue sends job messages; *sqsqueue.Sender is one.
type Queue interface {
	Send(ctx context.Context, m sqsqueue.Message) error
}

// Schedules creates the one-time schedules of jobs due later than SQS can
// delay a message; *schedule.Scheduler is one. Create of a schedule that
// exists already (an earlier try's) is success.
type Schedules interface {
	Create(ctx context.Context, j schedule.Job) error
}

// Handler serves the API. Its fields are set once before use.
type Handler struct {
	Registry    *message.Registry
	Idempotency Idempotency
	Jobs        Jobs
	// List serves GET /v1/jobs (nil: the route answers 503).
	List Lister
	// Batches keeps the batches of POST /v1/batches (nil: the batch
	// routes answer 503).
	Batches Batches
	Queue   Queue
	// Schedules holds the jobs due later than 15 minutes (nil: such a job
	// fails with 503, and nothing claims it is scheduled).
	Schedules Schedules
	// Logger receives one line per request (obs.DefaultLogger() if nil).
	Logger *slog.Logger
	// Metrics counts ScheduleQuotaExceeded (nil: not counted).
	Metrics *engine.Metrics
	// AllowFederatedUsers accepts STS federated users
	// (arn:aws:sts::<acct>:federated-user/<name>) as callers, each name one
	// caller. Off (the default), they are refused with 403: the name is
	// chosen by whichever IAM user minted the token, so two IAM users can
	// be one caller, or one can pose as another.
	AllowFederatedUsers bool
	// Now is the clock (vclock.Now if nil: the wall clock, except in a
	// chaos build).
	Now func() time.Time
	// TracerProvider, when set, makes a SERVER span per request and a
	// PRODUCER span per send (spans.go); nil makes none.
	TracerProvider trace.TracerProvider
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return vclock.Now()
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
	ctx, endSpan := h.serverSpan(ctx, req)
	defer func() { endSpan(resp.StatusCode) }() // after the recovery below: a panic's 500 is recorded
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
	if trace := jobTraceID(ctx, traceHeader(ctx, req.Headers)); trace != "" {
		log = log.With(obs.KeyTraceID, trace)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		log = log.With(obs.KeySpanID, sc.SpanID().String())
	}
	if p == nil {
		resp = h.serve(ctx, log, req, corr)
	} else {
		resp = p.response(corr)
	}
	lvl := slog.LevelInfo
	if resp.StatusCode >= 500 {
		lvl = slog.LevelWarn
	}
	attrs := []any{"method", req.RequestContext.HTTP.Method, "path", req.RawPath, "status", resp.StatusCode}
	log.Log(ctx, lvl, "enqueue: request", append(attrs, requestAttrs(req, resp)...)...)
	return resp, nil
}

// requestAttrs are what the request line says about the job and a refusal,
// so that filtering the log by jobId finds every request about a job, a
// refused one too: the job's id (the path's for GET and DELETE, the one
// derived from the caller and the Idempotency-Key for POST), and for a
// problem its type (without ProblemTypePrefix), its detail as the reason,
// the state that refused it and the existing job of a duplicate.
func requestAttrs(req events.APIGatewayV2HTTPRequest, resp events.APIGatewayV2HTTPResponse) []any {
	var attrs []any
	if id := requestJobID(req); id != "" {
		attrs = append(attrs, obs.KeyJobID, id, obs.KeyMessageID, id)
	}
	if resp.Headers[HeaderContentType] != ContentTypeProblem {
		return attrs
	}
	var p Problem
	if json.Unmarshal([]byte(resp.Body), &p) != nil {
		return attrs
	}
	attrs = append(attrs, "problem", strings.TrimPrefix(p.Type, ProblemTypePrefix), obs.KeyReason, p.Detail)
	if p.State != "" {
		attrs = append(attrs, "state", p.State)
	}
	if p.ExistingJobID != "" {
		attrs = append(attrs, "existingJobId", p.ExistingJobID)
	}
	return attrs
}

// requestJobID is the id of the job a request is about, "" when it names
// none (an unknown route, no caller, no valid Idempotency-Key, a path id
// that is not a job id).
func requestJobID(req events.APIGatewayV2HTTPRequest) string {
	rt, ok := matchRoute(req)
	if !ok || rt.method == "" {
		return ""
	}
	if rt.method == methodList || rt.method == methodBatchPost || rt.method == methodBatchGet {
		return ""
	}
	if rt.method != http.MethodPost {
		if isJobID(rt.param) {
			return rt.param
		}
		return ""
	}
	caller, ok := Caller(req.RequestContext)
	raw, _ := header(req.Headers, HeaderIdempotencyKey)
	key, err := contract.ParseKey(raw)
	if !ok || err != nil {
		return ""
	}
	return message.DeriveMessageID(caller, key)
}

// correlationID returns the request's X-Correlation-Id, or a new one when it
// has none; an invalid one is a 400.
func correlationID(h map[string]string) (string, *Problem) {
	v, ok := header(h, HeaderCorrelationID)
	if !ok || v == "" {
		return uuid.NewString(), nil
	}
	if !message.ValidCorrelationID(v) {
		p := newProblem(http.StatusBadRequest, ProblemValidation,
			"header X-Correlation-Id must be 1-128 characters of letters, digits, '.', '_', ':' or '-' (e.g. X-Correlation-Id: order-4711), or absent")
		p.Errors = []message.FieldError{{Field: "header " + HeaderCorrelationID, Reason: "invalid"}}
		return uuid.NewString(), p
	}
	return v, nil
}

func (h *Handler) serve(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, corr string) events.APIGatewayV2HTTPResponse {
	rt, ok := matchRoute(req)
	if !ok {
		return newProblem(http.StatusNotFound, ProblemNotFound, "no such route; the API has "+routesList).response(corr)
	}
	if rt.method == "" {
		p := newProblem(http.StatusMethodNotAllowed, ProblemMethod, "this path takes "+rt.allow+"; the API has "+routesList)
		p.headers = map[string]string{"Allow": rt.allow}
		return p.response(corr)
	}
	caller, kind, ok := Principal(req.RequestContext)
	if !ok {
		return newProblem(http.StatusUnauthorized, ProblemUnauthenticated, "the request carries no authenticated caller").response(corr)
	}
	log = log.With("caller", caller)
	if kind == PrincipalFederatedUser && !h.AllowFederatedUsers {
		return federatedRefused(corr)
	}
	switch rt.method {
	case methodBatchPost:
		resp, p := h.postBatch(ctx, log, req, caller, corr)
		if p != nil {
			return p.response(corr)
		}
		return resp
	case methodBatchGet:
		return h.getBatch(ctx, log, caller, rt.param, corr)
	case methodList:
		return h.list(ctx, log, caller, req.QueryStringParameters, corr)
	case http.MethodGet:
		return h.get(ctx, log, caller, rt.param, corr)
	case http.MethodDelete:
		return h.cancel(ctx, log, caller, rt.param, corr)
	}
	resp, p := h.post(ctx, log, req, caller, rt.param, corr)
	if p != nil {
		return p.response(corr)
	}
	return resp
}

func unavailable(corr string) events.APIGatewayV2HTTPResponse {
	p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "a backing service failed; retry (a POST with the same Idempotency-Key)")
	p.retryAfter = time.Second
	return p.response(corr)
}
