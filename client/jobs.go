package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// The job types the API ships with that a producer enqueues, each with a
// typed method below; Enqueue sends any type.
const (
	TypePartnerVerification = "email.partner-verification.v1"
	TypePasswordReset       = "email.password-reset.v1"
	TypeWelcome             = "email.welcome.v1"
	TypePartnerDigest       = "email.partner-digest.v1"
	TypeWebhookDeliver      = "webhook.deliver.v1"
)

// PartnerVerificationArgs are the arguments of email.partner-verification.v1.
type PartnerVerificationArgs struct {
	UserID      string `json:"userId"`
	RoleCode    string `json:"roleCode"`
	CountryCode string `json:"countryCode"`
}

// PasswordResetArgs are the arguments of email.password-reset.v1.
type PasswordResetArgs struct {
	UserID      string `json:"userId"`
	CountryCode string `json:"countryCode"`
}

// WelcomeArgs are the arguments of email.welcome.v1.
type WelcomeArgs struct {
	UserID string `json:"userId"`
}

// PartnerDigestArgs are the arguments of email.partner-digest.v1 (DigestID
// is an ISO week such as 2026-W48).
type PartnerDigestArgs struct {
	UserID   string `json:"userId"`
	DigestID string `json:"digestId"`
}

// WebhookDeliverArgs are the arguments of webhook.deliver.v1: the id of
// the event to POST to the stack's webhook receiver.
type WebhookDeliverArgs struct {
	EventID string `json:"eventId"`
}

// DuplicatePolicy says whether a job may follow a finished job with the
// same key.
type DuplicatePolicy string

// The duplicate policies; empty means the API's default, AllowAfterFailed.
const (
	AllowAfterFailed DuplicatePolicy = "AllowAfterFailed" // a new job after any finished one
	RejectIfFailed   DuplicatePolicy = "RejectIfFailed"   // 409 after a Failed job
	RejectAlways     DuplicatePolicy = "RejectAlways"     // 409 after any finished job
)

// AfterPolicy says which ends of the job a continuation waits for run it.
type AfterPolicy string

// The after policies; empty means the API's default, OnSucceeded.
const (
	OnSucceeded AfterPolicy = "OnSucceeded" // run after a success; cancelled if the job it waits for is cancelled, expires or fails for good
	OnAnyEnd    AfterPolicy = "OnAnyEnd"    // run after any end
)

// State is a job's state.
type State string

// The job states. The client repeats the states of the wire format, so its
// users never see the server's internal types.
const (
	// StateAwaitingContinuation: the job waits for the job named by its
	// After to end; it is sent then, or cancelled if that end is not one
	// its AfterPolicy runs it after.
	StateAwaitingContinuation State = "AwaitingContinuation"
	// StatePending: the job is reserved under its key and its message not
	// yet confirmed sent (a request that crashed midway); the next request
	// with the key, or the job's own runAt, finishes it.
	StatePending    State = "Pending"
	StateEnqueued   State = "Enqueued"
	StateScheduled  State = "Scheduled"
	StateParked     State = "Parked"
	StateProcessing State = "Processing"
	StateSucceeded  State = "Succeeded"
	StateFailed     State = "Failed"
	StateCancelled  State = "Cancelled"
	StateExpired    State = "Expired"
)

// States lists every state, as the API may return it.
var States = []State{StateAwaitingContinuation, StatePending, StateEnqueued, StateScheduled, StateParked, StateProcessing,
	StateSucceeded, StateFailed, StateCancelled, StateExpired}

// Terminal reports whether a job in state s has finished.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateExpired:
		return true
	}
	return false
}

// EnqueueOptions are the optional parts of an enqueue. The zero value asks
// for the API's defaults and a generated Idempotency-Key.
type EnqueueOptions struct {
	// Key is the job's deduplication key; empty lets the API derive it from
	// the arguments (e.g. welcome:u-123).
	Key string
	// DuplicatePolicy applies when a finished job with the key exists.
	DuplicatePolicy DuplicatePolicy
	// DelaySeconds postpones the job (the job reads Scheduled until then),
	// at most 900 seconds.
	DelaySeconds int
	// RunAt is when the job is due, at most 365 days ahead (the job reads
	// Scheduled until then); zero runs it now, and so does a time in the
	// past. Beyond 15 minutes the API holds it in a one-time schedule,
	// whose precision is about a minute. Not together with DelaySeconds.
	RunAt time.Time
	// IdempotencyKey identifies this request across retries; give the same
	// one to repeat a request safely (e.g. after a crash). Generated when
	// empty; every retry of one call uses the same.
	IdempotencyKey string
	// CorrelationID is sent as X-Correlation-Id and travels with the job.
	CorrelationID string
	// After makes the job a continuation: it waits (AwaitingContinuation)
	// for the job with this id, one of this caller's, to end, and runs
	// then as AfterPolicy says. Not together with RunAt or DelaySeconds.
	After       string
	AfterPolicy AfterPolicy
}

// Result is the API's answer to an enqueue.
type Result struct {
	JobID         string `json:"jobId"`
	Type          string `json:"type"`
	State         State  `json:"state"`
	Key           string `json:"key"`
	CorrelationID string `json:"correlationId"`
	// Deduplicated is true when an active job with the same key already
	// existed: JobID is that job's (HTTP 200).
	Deduplicated bool `json:"deduplicated"`
	// Replayed is true when the API answered from its store of responses:
	// a request with this Idempotency-Key had already been handled.
	Replayed bool `json:"replayed"`
	// Location is the job's URL path (/v1/jobs/{jobId}).
	Location string `json:"location,omitempty"`
	// StatusCode is 202 for a new job, 200 for a deduplicated one.
	StatusCode int `json:"statusCode"`
	// IdempotencyKey is the key the request was sent with.
	IdempotencyKey string `json:"idempotencyKey"`
	// Attempts is how many times the request was sent.
	Attempts int `json:"attempts"`
}

// Job is a job record as the API reports it. Fields the API adds later are
// ignored. It repeats the JSON fields of internal/jobs.Job on purpose: its
// users never see the server's internal types.
type Job struct {
	JobID          string    `json:"jobId"`
	Type           string    `json:"type"`
	Key            string    `json:"key"`
	State          State     `json:"state"`
	Queue          string    `json:"queue,omitempty"`
	CorrelationID  string    `json:"correlationId,omitempty"`
	Attempts       int       `json:"attempts"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	RunAt          time.Time `json:"runAt"`
	LastErrorClass string    `json:"lastErrorClass,omitempty"`
	LastOutcome    string    `json:"lastOutcome,omitempty"`
	LastReason     string    `json:"lastReason,omitempty"`
	// History holds the outcomes before LastOutcome, oldest first.
	History []Outcome `json:"history,omitempty"`
	TraceID string    `json:"traceId,omitempty"`
	// FailedAt is when the job was marked Failed.
	FailedAt *time.Time `json:"failedAt,omitempty"`
	// After and AfterPolicy are set for a continuation: the job it waits
	// for, and which of that job's ends run it.
	After       string      `json:"after,omitempty"`
	AfterPolicy AfterPolicy `json:"afterPolicy,omitempty"`
	// Continuations are the jobs that wait (or waited) for this one, as an
	// operator's view shows them; GET leaves it empty.
	Continuations []string `json:"continuations,omitempty"`
}

// segment is what a job type or job id may look like in a URL path.
var segment = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,255}$`)

// printableKey is an Idempotency-Key the API accepts: 1-255 printable ASCII.
var printableKey = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)

// Enqueue asks for a job of jobType with args (a struct or map encoded as
// the JSON object "args").
func (c *Client) Enqueue(ctx context.Context, jobType string, args any, opts EnqueueOptions) (*Result, error) {
	if !segment.MatchString(jobType) {
		return nil, fmt.Errorf("client: job type %q: want letters, digits, '.', '_', '~' or '-'", jobType)
	}
	fields, err := jobFields(args, opts)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("client: encode args of %s: %w", jobType, err)
	}
	idem, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	h := postHeader(idem, opts.CorrelationID)
	r, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/jobs/" + jobType, body: body, header: h})
	if err != nil {
		return nil, err
	}
	res := &Result{}
	if err := json.Unmarshal(r.body, res); err != nil || res.JobID == "" {
		return nil, fmt.Errorf("client: POST /v1/jobs/%s: %d answer is not a job: %q", jobType, r.resp.StatusCode, r.body[:min(len(r.body), maxDetail)])
	}
	res.Replayed = r.resp.Header.Get("Idempotent-Replayed") == "true"
	res.Location = r.resp.Header.Get("Location")
	res.StatusCode, res.IdempotencyKey, res.Attempts = r.resp.StatusCode, idem, r.attempts
	return res, nil
}

// PartnerVerification enqueues email.partner-verification.v1.
func (c *Client) PartnerVerification(ctx context.Context, args PartnerVerificationArgs, opts EnqueueOptions) (*Result, error) {
	return c.Enqueue(ctx, TypePartnerVerification, args, opts)
}

// PasswordReset enqueues email.password-reset.v1.
func (c *Client) PasswordReset(ctx context.Context, args PasswordResetArgs, opts EnqueueOptions) (*Result, error) {
	return c.Enqueue(ctx, TypePasswordReset, args, opts)
}

// Welcome enqueues email.welcome.v1.
func (c *Client) Welcome(ctx context.Context, args WelcomeArgs, opts EnqueueOptions) (*Result, error) {
	return c.Enqueue(ctx, TypeWelcome, args, opts)
}

// WebhookDeliver enqueues webhook.deliver.v1.
func (c *Client) WebhookDeliver(ctx context.Context, args WebhookDeliverArgs, opts EnqueueOptions) (*Result, error) {
	return c.Enqueue(ctx, TypeWebhookDeliver, args, opts)
}

// PartnerDigest enqueues email.partner-digest.v1.
func (c *Client) PartnerDigest(ctx context.Context, args PartnerDigestArgs, opts EnqueueOptions) (*Result, error) {
	return c.Enqueue(ctx, TypePartnerDigest, args, opts)
}

// Get reads a job of this caller; a job of anyone else is ErrNotFound.
func (c *Client) Get(ctx context.Context, jobID string) (*Job, error) {
	return c.job(ctx, http.MethodGet, jobID)
}

// Cancel cancels a job that has not run: it then reads Cancelled and never
// runs. Cancelling again is fine. A job that already Succeeded or Failed is
// a *Problem matching ErrConflict, with its State; a job of anyone else is
// ErrNotFound.
func (c *Client) Cancel(ctx context.Context, jobID string) (*Job, error) {
	return c.job(ctx, http.MethodDelete, jobID)
}

func (c *Client) job(ctx context.Context, method, jobID string) (*Job, error) {
	if !segment.MatchString(jobID) {
		return nil, fmt.Errorf("client: job id %q: want letters, digits, '.', '_', '~' or '-'", jobID)
	}
	r, err := c.do(ctx, call{method: method, path: "/v1/jobs/" + jobID})
	if err != nil {
		return nil, err
	}
	j := &Job{}
	if err := json.Unmarshal(r.body, j); err != nil {
		return nil, fmt.Errorf("client: %s /v1/jobs/%s: %d answer is not a job: %w", method, jobID, r.resp.StatusCode, err)
	}
	if j.JobID == "" {
		j.JobID = jobID
	}
	return j, nil
}

// Wait reads the job every interval until it has finished (a terminal
// state) and returns it. When the context ends first, it returns the job as
// last read with the context's error.
func (c *Client) Wait(ctx context.Context, jobID string, interval time.Duration) (*Job, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("client: Wait interval %s must be positive", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last *Job
	for {
		j, err := c.Get(ctx, jobID)
		switch {
		case err != nil && last != nil && ctx.Err() != nil:
			return last, fmt.Errorf("client: job %s still %s: %w", jobID, last.State, ctx.Err())
		case err != nil:
			return nil, err
		case j.State.Terminal():
			return j, nil
		}
		last = j
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("client: job %s still %s: %w", jobID, j.State, ctx.Err())
		case <-t.C:
		}
	}
}

// Outcome is one earlier outcome of a job: when, what and why.
type Outcome struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason,omitempty"`
}
