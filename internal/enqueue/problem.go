package enqueue

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/runstwice/runstwice/message"
)

// Media types of the responses.
const (
	ContentTypeJSON    = "application/json"
	ContentTypeProblem = "application/problem+json"
)

// Header names the API reads or writes.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderCorrelationID  = "X-Correlation-Id"
	HeaderReplayed       = "Idempotent-Replayed"
	HeaderRetryAfter     = "Retry-After"
	HeaderLocation       = "Location"
	HeaderContentType    = "Content-Type"
)

// reply is a response of the API: its status, its headers (one value each)
// and its body.
type reply struct {
	StatusCode int
	Headers    map[string]string
	Body       string
}

// write sends r to w.
func (r reply) write(w http.ResponseWriter) {
	for k, v := range r.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(r.StatusCode)
	_, _ = io.WriteString(w, r.Body)
}

// ProblemTypePrefix prefixes every problem type URI.
const ProblemTypePrefix = "urn:runstwice:problem:"

// Problem is an RFC 9457 problem detail, the body of every error response (a
// plain JSON struct: its form matches other declarations by chance).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Errors lists the fields that failed validation.
	Errors []message.FieldError `json:"errors,omitempty"`
	// ExistingJobID and Policy explain a 409 duplicate-policy rejection.
	ExistingJobID string `json:"existingJobId,omitempty"`
	Policy        string `json:"policy,omitempty"`
	// State is the job's state when it forbids the request (a 409 to a
	// cancel).
	State string `json:"state,omitempty"`
	// CorrelationID is the request's correlation id, for support.
	CorrelationID string `json:"correlationId,omitempty"`

	retryAfter time.Duration
	headers    map[string]string
}

// The problem types (the part after ProblemTypePrefix).
const (
	ProblemValidation      = "validation-failed"
	ProblemUnauthenticated = "unauthenticated"
	ProblemCallerRefused   = "caller-not-accepted"
	ProblemUnknownType     = "unknown-job-type"
	ProblemNotFound        = "not-found"
	ProblemMethod          = "method-not-allowed"
	ProblemTooLarge        = "payload-too-large"
	ProblemMediaType       = "unsupported-media-type"
	ProblemKeyMismatch     = "idempotency-key-reused"
	ProblemInFlight        = "request-in-flight"
	ProblemDuplicate       = "duplicate-job-rejected"
	ProblemNotCancellable  = "job-not-cancellable"
	ProblemUnavailable     = "service-unavailable"
	ProblemScheduleQuota   = "schedule-quota-exceeded"
	// ProblemTooManyContinuations: the job named by after already has
	// jobs.MaxContinuations waiting for it (409).
	ProblemTooManyContinuations = "too-many-continuations"
	ProblemInternal             = "internal-error"
)

func newProblem(status int, kind, detail string) *Problem {
	return &Problem{Type: ProblemTypePrefix + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}

// response renders p with the request's correlation id.
func (p *Problem) response(correlationID string) reply {
	if p.CorrelationID == "" {
		p.CorrelationID = correlationID
	}
	h := map[string]string{HeaderContentType: ContentTypeProblem}
	if correlationID != "" {
		h[HeaderCorrelationID] = correlationID
	}
	if p.retryAfter > 0 {
		h[HeaderRetryAfter] = retryAfter(p.retryAfter)
	}
	for k, v := range p.headers {
		h[k] = v
	}
	return reply{StatusCode: p.Status, Headers: h, Body: mustJSON(p)}
}

// retryAfter renders d as whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// mustJSON renders v as a JSON body, ending with a newline.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // only plain structs of strings and numbers are rendered
		return `{"type":"` + ProblemTypePrefix + ProblemInternal + `","title":"Internal Server Error","status":500,"detail":"response encoding failed"}` + "\n"
	}
	return string(b) + "\n"
}

// federatedRefusedDetail is the detail of the 403 a federated user gets on
// a stack that does not allow them.
const federatedRefusedDetail = "the caller is an AWS STS federated user (arn:aws:sts::<account>:federated-user/<name>, " +
	"from GetFederationToken), which this stack does not accept: the name is chosen by whichever IAM user asked for " +
	"the token, so it cannot tell one caller from another. Sign as an IAM user or an assumed role, or deploy the " +
	"stack with the parameter AllowFederatedUsers=true to accept each federated user's name as its caller"

// federatedRefused is the answer to a federated user on a stack that does
// not allow them (Handler.AllowFederatedUsers).
func federatedRefused(corr string) reply {
	return newProblem(http.StatusForbidden, ProblemCallerRefused, federatedRefusedDetail).response(corr)
}
