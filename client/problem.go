package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ProblemTypePrefix prefixes the type URI of every problem the runstwice API
// answers with.
const ProblemTypePrefix = "urn:runstwice:problem:"

// Problem types a producer acts on.
const (
	// ProblemValidation: the request is invalid (400); Errors names the fields.
	ProblemValidation = ProblemTypePrefix + "validation-failed"
	// ProblemUnknownType: no such job type (404).
	ProblemUnknownType = ProblemTypePrefix + "unknown-job-type"
	// ProblemNotFound: no such job for this caller (404).
	ProblemNotFound = ProblemTypePrefix + "not-found"
	// ProblemKeyReused: the Idempotency-Key was used for another request (422).
	ProblemKeyReused = ProblemTypePrefix + "idempotency-key-reused"
	// ProblemInFlight: a request with this Idempotency-Key is still being
	// processed (409 with Retry-After); the client retries it.
	ProblemInFlight = ProblemTypePrefix + "request-in-flight"
	// ProblemDuplicateRejected: a finished job with this key exists and the
	// duplicate policy rejects a new one (409); see ExistingJobID and Policy.
	ProblemDuplicateRejected = ProblemTypePrefix + "duplicate-job-rejected"
	// ProblemScheduleQuota: the job is due later than 15 minutes and the
	// service's account holds as many schedules as EventBridge Scheduler
	// allows (503). The client does not retry it: no retry succeeds until
	// an operator raises the quota or schedules fire. Send a runAt within
	// 15 minutes, or retry later with the same Idempotency-Key.
	ProblemScheduleQuota = ProblemTypePrefix + "schedule-quota-exceeded"
	// ProblemTooManyContinuations: the job an After names already has
	// MaxContinuations waiting (409).
	ProblemTooManyContinuations = ProblemTypePrefix + "too-many-continuations"
)

// MaxContinuations is the most continuations that wait for one job.
const MaxContinuations = 100

// Errors a *Problem matches with errors.Is.
var (
	// ErrNotFound: the job (or job type) does not exist for this caller.
	ErrNotFound = errors.New("runstwice: not found")
	// ErrDuplicateRejected: the duplicate policy rejected the job.
	ErrDuplicateRejected = errors.New("runstwice: duplicate job rejected")
	// ErrKeyReused: the Idempotency-Key belongs to a different request.
	ErrKeyReused = errors.New("runstwice: idempotency key reused for another request")
	// ErrConflict: any 409, e.g. cancelling a job that already finished
	// (Problem.State says which state it is in).
	ErrConflict = errors.New("runstwice: conflict")
	// ErrScheduleQuota: the service cannot schedule a job due later than
	// 15 minutes until its schedule quota is raised (ProblemScheduleQuota).
	ErrScheduleQuota = errors.New("runstwice: the service's schedule quota is reached")
)

// Problem is an error answer of the API: an RFC 9457 problem detail. The
// gateway's own refusals (403 for a bad signature, 429, 5xx without a body)
// are reported as a Problem too, with the gateway's message as Detail.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Errors lists the fields that failed validation.
	Errors []FieldError `json:"errors,omitempty"`
	// ExistingJobID and Policy explain a duplicate rejection.
	ExistingJobID string `json:"existingJobId,omitempty"`
	Policy        string `json:"policy,omitempty"`
	// State is the job's state when a cancel was refused.
	State State `json:"state,omitempty"`
	// CorrelationID identifies the request in the service's logs.
	CorrelationID string `json:"correlationId,omitempty"`
	// RetryAfter is the answer's Retry-After, when it had one.
	RetryAfter time.Duration `json:"-"`
}

// FieldError is one invalid field of a request.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Error implements error.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runstwice: %d %s", p.Status, p.Title)
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	for _, f := range p.Errors {
		if !strings.Contains(p.Detail, f.Field) { // the API's detail usually names them
			fmt.Fprintf(&b, "; %s %s", f.Field, f.Reason)
		}
	}
	return b.String()
}

// Is reports whether p is one of ErrNotFound, ErrDuplicateRejected,
// ErrKeyReused, ErrConflict or ErrScheduleQuota.
func (p *Problem) Is(target error) bool {
	switch target {
	case ErrScheduleQuota:
		return p.Type == ProblemScheduleQuota
	case ErrNotFound:
		return p.Status == http.StatusNotFound
	case ErrDuplicateRejected:
		return p.Status == http.StatusConflict && p.Type == ProblemDuplicateRejected
	case ErrKeyReused:
		return p.Status == http.StatusUnprocessableEntity
	case ErrConflict:
		return p.Status == http.StatusConflict
	}
	return false
}

// inFlight reports whether p says the same request is still being handled.
func (p *Problem) inFlight() bool {
	return p.Status == http.StatusConflict && p.Type == ProblemInFlight
}

// retryable reports whether the same request may succeed later: a 5xx, a
// throttle (429) or a request still in flight; never a schedule quota
// reached, which no retry mends until an operator acts.
func (p *Problem) retryable() bool {
	if p.Type == ProblemScheduleQuota {
		return false
	}
	return p.Status >= 500 || p.Status == http.StatusTooManyRequests || p.inFlight()
}

// maxDetail bounds how much of a body that is not a problem is kept.
const maxDetail = 512

// problemFrom reads an error answer: a problem+json body, API Gateway's
// {"message": …}, or anything else (kept, shortened, as the detail).
func problemFrom(resp *http.Response, body []byte) *Problem {
	p := &Problem{}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if strings.HasSuffix(mt, "json") && json.Unmarshal(body, p) == nil && p.Type != "" {
		p.Status = resp.StatusCode // the status line wins over the body
	} else {
		var gw struct {
			Message string `json:"message"`
		}
		p = &Problem{Type: "about:blank", Status: resp.StatusCode}
		if json.Unmarshal(body, &gw) == nil && gw.Message != "" {
			p.Detail = gw.Message
		} else {
			p.Detail = strings.TrimSpace(string(body[:min(len(body), maxDetail)]))
		}
	}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return p
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
