package enqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
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
	// RelayableUntil is when the request can come again at the latest
	// (an outbox item: its expiresAt, then its stream record's retention;
	// zero: lifetime.RelayDecision from now): the decision is kept at
	// least that long.
	RelayableUntil time.Time
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
// caller with r.IdempotencyKey would (the way in for callers that are not
// HTTP requests, such as the outbox relay): the same validation, job id,
// dedup, duplicate policy and scheduling, through the same code, under the
// same request layer. Its answer is stored under (caller, key) and
// replayed for as long as the request can come again (the relay's floor,
// lifetime.RelayDecision: an outbox item can be relayed until its TTL and
// then its stream record are gone): an item relayed again answers what its
// first relay answered, even when that was a dedup onto another job that
// has since ended, and the same item rewritten with another request (other
// args, runAt, policy) is a mismatch (422), never a silent keep of the old
// job. The answer is the API's status with its problem type and detail, or
// the job.
func (h *Handler) EnqueueFor(ctx context.Context, r Request) Answer {
	log := h.logger(ctx).With("caller", r.Caller)
	jt, err := h.Registry.Lookup(r.Type)
	if err != nil {
		return problemAnswer(newProblem(http.StatusNotFound, ProblemUnknownType, "unknown job type "+contract.Printable(r.Type)))
	}
	log = log.With(obs.KeyType, jt.Name)
	if p := scheduledOnly(jt); p != nil {
		return problemAnswer(p)
	}
	if len(r.Body) > MaxBodyBytes {
		return problemAnswer(newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("the request is larger than %d bytes", MaxBodyBytes)))
	}
	idemKey, err := contract.ParseKey(r.IdempotencyKey)
	if err != nil {
		return problemAnswer(validation("idempotencyKey", strings.TrimPrefix(err.Error(), contract.ErrInvalidKey.Error()+": ")))
	}
	corr := r.CorrelationID
	switch {
	case corr == "":
		corr = message.DeriveMessageID(r.Caller, idemKey) // stable across relays
	case !message.ValidCorrelationID(corr):
		return problemAnswer(validation("correlationId", "must be 1-128 characters of letters, digits, '.', '_', ':' or '-'"))
	}
	in, err := contract.DecodeBodyAt(jt, r.Body, h.now())
	if err != nil {
		return problemAnswer(invalidProblem(log, "decode", "the request", err))
	}
	if strings.HasPrefix(in.After, "#") {
		return problemAnswer(validation("after", "names a job of a batch; give the jobId of the job this one waits for"))
	}
	fp, err := idempotency.Fingerprint(http.MethodPost, jobsPrefix+jt.Name, r.Body)
	if err != nil {
		return problemAnswer(validation("body", "is not valid JSON"))
	}
	log = log.With(obs.KeyCorrelationID, corr)
	// A stream shard is relayed by one invocation at a time: a lock the
	// relay meets under its caller is a dead relay's, taken over at once
	// (its retry must not wait out the lock while the event source spends
	// its retries).
	resp, p := h.runOnce(ctx, log, r.Caller, killpoint.RelayKey(idemKey), fp, corr, func(lock idempotency.Lock) (reply, bool) {
		return h.enqueue(ctx, log, lockKeeper{h: h, lock: lock, floor: relayFloor(h.now(), r.RelayableUntil)}, jt, in, r.Caller, idemKey, fp, corr, obs.TraceHeader(ctx))
	})
	if p != nil {
		return problemAnswer(p)
	}
	return answerOf(resp.StatusCode, []byte(resp.Body))
}

// relayFloor is how long a relay's decision is kept at least: the relay's
// floor, or until its item can no longer be relayed when that is later (an
// item written with a longer TTL, or whose TTL deletion is late).
func relayFloor(now, until time.Time) time.Duration {
	return max(lifetime.RelayDecision, until.Sub(now))
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
