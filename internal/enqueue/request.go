package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/obs"
)

// Request is a request to enqueue a job for a caller without HTTP (the
// outbox relay's): what a POST carries, as values.
type Request struct {
	Caller         string
	Type           string
	IdempotencyKey string
	// CorrelationID travels with the job; "" derives a stable one.
	CorrelationID string
	// Body is the request body as the API takes it.
	Body []byte
}

// Answer is what the API would have answered a Request: its HTTP status
// and, for a problem, its type (the part after ProblemTypePrefix) and
// detail; else the job.
type Answer struct {
	Status  int
	Problem string
	Detail  string
	JobID   string
	State   string
}

// EnqueueFor enqueues the request r of r.Caller exactly as a POST of that
// caller with r.IdempotencyKey would (the way in for callers that are not HTTP requests, such as the outbox relay): the same
// validation, job id, dedup, duplicate policy and scheduling, through the
// same code. Only the request layer is left out: no answer is stored under
// the key, since the job id derived from (caller, key) already makes every
// relay of one item the same job, and an item written again with other
// args under its key is refused as the API refuses it (422). The answer is
// the API's status with its problem type and detail, or the job.
func (h *Handler) EnqueueFor(ctx context.Context, r Request) Answer {
	log := h.logger(ctx).With("caller", r.Caller)
	jt, err := h.Registry.Lookup(r.Type)
	if err != nil {
		return problemAnswer(newProblem(http.StatusNotFound, ProblemUnknownType, "unknown job type "+printable(r.Type)))
	}
	log = log.With(obs.KeyType, jt.Name)
	if p := scheduledOnly(jt); p != nil {
		return problemAnswer(p)
	}
	if len(r.Body) > MaxBodyBytes {
		return problemAnswer(newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("the request is larger than %d bytes", MaxBodyBytes)))
	}
	idemKey, err := idempotency.ParseKey(r.IdempotencyKey)
	if err != nil {
		return problemAnswer(validation("idempotencyKey", strings.TrimPrefix(err.Error(), idempotency.ErrInvalidKey.Error()+": ")))
	}
	corr := r.CorrelationID
	switch {
	case corr == "":
		corr = contract.DeriveMessageID(r.Caller, idemKey) // stable across relays
	case !contract.ValidCorrelationID(corr):
		return problemAnswer(validation("correlationId", "must be 1-128 characters of letters, digits, '.', '_', ':' or '-'"))
	}
	in, err := DecodeBodyAt(jt, r.Body, h.now())
	if err != nil {
		var ve *contract.ValidationError
		if errors.As(err, &ve) {
			p := newProblem(http.StatusBadRequest, ProblemValidation, "the request is invalid: "+ve.Detail())
			p.Errors = ve.Fields
			return problemAnswer(p)
		}
		log.Error("enqueue: decode", obs.KeyError, obs.Redact(err))
		return problemAnswer(newProblem(http.StatusInternalServerError, ProblemInternal, "internal error"))
	}
	resp, _ := h.enqueue(ctx, log.With(obs.KeyCorrelationID, corr), promoteOnly{h: h}, jt, in, r.Caller, idemKey, corr, obs.TraceHeader(ctx))
	return answerOf(resp.StatusCode, []byte(resp.Body))
}

// problemAnswer is the answer of a problem.
func problemAnswer(p *Problem) Answer {
	return Answer{Status: p.Status, Problem: strings.TrimPrefix(p.Type, ProblemTypePrefix), Detail: p.Detail}
}

// answerOf reads an enqueue's answer from its status and body: a job, or a
// problem.
func answerOf(status int, body []byte) Answer {
	var b struct {
		JobID  string `json:"jobId"`
		State  string `json:"state"`
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(body, &b) // every answer of enqueue is one JSON object
	a := Answer{Status: status, JobID: b.JobID, State: b.State}
	if status >= 300 {
		a.Problem, a.Detail = strings.TrimPrefix(b.Type, ProblemTypePrefix), b.Detail
	}
	return a
}
