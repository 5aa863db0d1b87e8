// Package enqueue is the HTTP API of runstwice: POST /v1/jobs/{type}
// enqueues a job, GET /v1/jobs/{jobId} shows it to its caller, DELETE
// /v1/jobs/{jobId} cancels it, GET /v1/jobs lists the caller's jobs, POST
// /v1/batches and GET /v1/batches/{batchId} make and show a batch
// (docs/api.md). Handler is a net/http handler on Go's ServeMux patterns;
// on Lambda, behind API Gateway's HTTP API (payload v2), Handle serves it
// through internal/apigw.
//
// The files: routes.go routes, caller.go says who is calling, body.go
// decodes and checks a POST body, keyed.go runs a POST under the
// Idempotency-Key middleware, enqueue.go is the enqueue flow, job.go
// serves GET and DELETE, problem.go renders every error as
// application/problem+json.
//
// A POST goes through two idempotency layers. The request layer
// (engine/idempotencykey's middleware on internal/idempotency's table)
// replays the first response to a retried request. The enqueue layer
// (internal/jobs) keeps one job per (caller, type, key) while it is active
// and applies the DuplicatePolicy after it ended. The order of writes
// neither loses nor ghosts a job:
//
//  1. lock the request (IN_PROGRESS, owner, lockedUntil: the middleware's
//     lease);
//  2. reserve the job: a Pending record and the dedup pointer, in one
//     conditional transaction;
//  3. send the message to SQS under the job id derived from (caller,
//     Idempotency-Key), with its delay; a job due later than SQS can delay
//     a message (15 minutes) gets a one-time EventBridge Scheduler schedule
//     instead, named by the job id, that sends the same message when due;
//  4. in one transaction, promote the record to Enqueued/Scheduled and store
//     the response under the request's key (conditional on the lease).
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
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/apigw"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/vclock"
	"github.com/runstwice/runstwice/message"
)

// Idempotency is the request layer; *idempotency.Store is one. An HTTP
// request runs under the Idempotency-Key middleware on Keys, and keeps its
// answer with Complete under the lock the middleware's lease took; the
// outbox relay, which enqueues without HTTP, takes its lock with TakeOver.
type Idempotency interface {
	// Keys is the table as the engine.Store the middleware runs on: keys
	// of name are requests (idempotency.KeyOf), kept where Begin and
	// TakeOver keep them.
	Keys(name string) engine.Store
	// TakeOver starts a request of a caller whose requests for one key
	// never run at once (the outbox relay's): a lock it meets is a dead
	// request's, taken over at once.
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

// ServeHTTP serves the API (net/http, Go's ServeMux patterns: Routes). The
// caller is the requestContext in the request's context (apigw: API
// Gateway's, or one the local stack or a test set). Every error is a
// problem+json; no input makes it panic: a bug is answered with 500.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, next, route := route(r)
	ctx, endSpan := h.serverSpan(r.Context(), r, route)
	rec := h.serve(next, r.WithContext(ctx), route)
	endSpan(rec.Status()) // a panic's 500 is recorded
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Status())
	_, _ = w.Write(rec.Body())
}

// Handle serves one API Gateway request (payload v2) through ServeHTTP: the
// Lambda function's handler. It always returns a response and a nil error.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return apigw.Handler(h)(ctx, req)
}

// call is what every route of a request shares: its log, its correlation
// id and its caller (once the route has checked it).
type call struct {
	h      *Handler
	log    *slog.Logger
	corr   string
	caller string
}

type callKey struct{}

// callOf is the request's call (a zero one outside ServeHTTP).
func callOf(ctx context.Context) *call {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c
	}
	return &call{h: &Handler{}, log: obs.DefaultLogger()}
}

// serve runs next for r into a recorder, after the correlation id's check,
// and logs the request line. A panic is answered with 500 (and no request
// line).
func (h *Handler) serve(next http.Handler, r *http.Request, route string) (rec *apigw.Recorder) {
	ctx := r.Context()
	log := h.logger(ctx)
	c := &call{h: h, log: log}
	defer func() {
		if p := recover(); p != nil {
			log.Error("enqueue: panic", "panic", fmt.Sprint(p))
			rec = apigw.NewRecorder()
			newProblem(http.StatusInternalServerError, ProblemInternal, "internal error").response(c.corr).write(rec)
		}
	}()
	rec = apigw.NewRecorder()
	corr, p := correlationID(r.Header)
	c.corr = corr
	log = log.With(obs.KeyCorrelationID, corr)
	if trace := jobTraceID(ctx, traceHeader(ctx, r.Header)); trace != "" {
		log = log.With(obs.KeyTraceID, trace)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		log = log.With(obs.KeySpanID, sc.SpanID().String())
	}
	c.log = log
	routed := r.WithContext(context.WithValue(ctx, callKey{}, c))
	if p == nil {
		next.ServeHTTP(rec, routed) // the mux sets routed's path values
	} else {
		p.response(corr).write(rec)
	}
	lvl := slog.LevelInfo
	if rec.Status() >= 500 {
		lvl = slog.LevelWarn
	}
	attrs := []any{"method", r.Method, "path", r.URL.EscapedPath(), "status", rec.Status()}
	log.Log(ctx, lvl, "enqueue: request", append(attrs, requestAttrs(routed, route, rec)...)...)
	return rec
}

// endpoint is a route of the API: its caller is checked (401 without one,
// 403 for a federated user the stack does not accept) before fn serves it;
// a problem fn returns is its answer.
func endpoint(fn func(h *Handler, w http.ResponseWriter, r *http.Request, c *call) *Problem) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := callOf(r.Context())
		h := c.h
		rc, _ := apigw.RequestContext(r.Context())
		caller, kind, ok := Principal(rc)
		if !ok {
			newProblem(http.StatusUnauthorized, ProblemUnauthenticated, "the request carries no authenticated caller").response(c.corr).write(w)
			return
		}
		if kind == PrincipalFederatedUser && !h.AllowFederatedUsers {
			federatedRefused(c.corr).write(w)
			return
		}
		if p := fn(h, w, r, &call{h: h, log: c.log.With("caller", caller), corr: c.corr, caller: caller}); p != nil {
			p.response(c.corr).write(w)
		}
	})
}

// requestAttrs are what the request line says about the job and a refusal,
// so that filtering the log by jobId finds every request about a job, a
// refused one too: the job's id (the path's for GET and DELETE, the one
// derived from the caller and the Idempotency-Key for POST), and for a
// problem its type (without ProblemTypePrefix), its detail as the reason,
// the state that refused it and the existing job of a duplicate.
func requestAttrs(r *http.Request, route string, rec *apigw.Recorder) []any {
	var attrs []any
	if id := requestJobID(r, route); id != "" {
		attrs = append(attrs, obs.KeyJobID, id, obs.KeyMessageID, id)
	}
	if rec.Header().Get(HeaderContentType) != ContentTypeProblem {
		return attrs
	}
	var p Problem
	if json.Unmarshal(rec.Body(), &p) != nil {
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
// that is not a job id). r is the request the mux routed to route.
func requestJobID(r *http.Request, route string) string {
	switch route {
	case routeGetJob, routeCancelJob:
		if id := apigw.PathValue(r, "jobId"); isJobID(id) {
			return id
		}
	case routePostJob:
		rc, _ := apigw.RequestContext(r.Context())
		caller, ok := Caller(rc)
		key, err := contract.ParseKey(headerValue(r.Header, HeaderIdempotencyKey))
		if ok && err == nil {
			return message.DeriveMessageID(caller, key)
		}
	}
	return ""
}

// correlationID returns the request's X-Correlation-Id, or a new one when it
// has none; an invalid one is a 400.
func correlationID(h http.Header) (string, *Problem) {
	v := headerValue(h, HeaderCorrelationID)
	if v == "" {
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

func unavailable(corr string) reply {
	p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "a backing service failed; retry (a POST with the same Idempotency-Key)")
	p.retryAfter = time.Second
	return p.response(corr)
}
