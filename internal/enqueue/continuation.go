package enqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
)

// continuationRefused is the problem of a reservation its parent refused: a
// parent the caller cannot see is 404 (another caller's job reads as none),
// one with jobs.MaxContinuations already is 409. Neither is stored under
// the request's key: the same request may succeed once the parent exists or
// a continuation is cancelled.
func continuationRefused(err error, after string) *Problem {
	switch {
	case errors.Is(err, jobs.ErrParentNotFound):
		p := newProblem(http.StatusNotFound, ProblemNotFound, fmt.Sprintf("after: job %s is not found; a job waits only for a job of its own caller", after))
		p.Errors = nil
		return p
	case errors.Is(err, jobs.ErrTooManyContinuations):
		return newProblem(http.StatusConflict, ProblemTooManyContinuations, fmt.Sprintf(
			"after: job %s already has %d jobs waiting for it; cancel one, or wait for another job", after, jobs.MaxContinuations))
	}
	return nil
}

// awaitAndFinish answers the enqueue of a continuation, reserved (or found
// reserved by an earlier try of the same request) AwaitingContinuation:
// when its parent has already ended it is decided at once (ReleaseContinuations: sent,
// or cancelled with its reason), else it waits for the parent's end. The
// answer says its state as it is then. A continuation decided at once is
// sent by this request, as any job is: when its release fails (its send,
// or a read or write before it) the answer is the 503 of any job's failed
// send, not stored, and the caller's retry sends it (or decides it
// again); never a 202 that only the continuation sweep would honour.
func (h *Handler) awaitAndFinish(ctx context.Context, log *slog.Logger, keep keeper, d jobs.Decision, corr string) (reply, bool) {
	job := d.Job
	rep, err := h.Jobs.ReleaseContinuations(ctx, job.After, h.SendFunc())
	state := jobs.StateAwaitingContinuation
	switch {
	case slices.Contains(rep.Sent, job.ID):
		state = jobs.StateEnqueued
	case slices.Contains(rep.Cancelled, job.ID):
		state = jobs.StateCancelled
	case slices.Contains(rep.Failed, job.ID), err != nil && !rep.Decided(job.ID):
		return h.releaseFailed(log, job, err).response(corr), false
	case rep.State.Terminal():
		// The parent has ended and this release did not decide the job:
		// another release did, or is sending it (it is in rep.Waiting
		// then), or its policy keeps it waiting (a Failed parent a redrive
		// may still run). Say what its record says.
		if cur, gerr := h.Jobs.Get(ctx, job.ID); gerr == nil {
			state = cur.State
		}
	}
	log.Info("enqueue: continuation", "after", job.After, "afterPolicy", string(job.AfterPolicy), "state", string(state))
	return h.finish(ctx, log, keep, jobResponse(http.StatusAccepted, job, state, false, corr), answerDue(job), corr)
}

// releaseFailed is the answer to an enqueue of continuation job whose
// release failed with err: a failed send is answered as any job's
// (handFailed), anything else as unavailable. Either is a 503 the caller
// retries under the same key.
func (h *Handler) releaseFailed(log *slog.Logger, job jobs.Job, err error) *Problem {
	var se *sendError
	if errors.As(err, &se) {
		return h.handFailed(log, job, se.what, se.err)
	}
	log.Error("enqueue: the continuation's parent has ended and its release failed; the key stays retryable", obs.KeyError, obs.Redact(err))
	p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "a backing service failed; retry (a POST with the same Idempotency-Key)")
	p.retryAfter = time.Second
	return p
}

// sendError is a hand-over that failed in a release (SendFunc): what did
// not accept the message, and why.
type sendError struct {
	what string
	err  error
}

func (e *sendError) Error() string { return e.what + ": " + e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// SendFunc hands a job's message to its queue (or the scheduler), as an
// enqueue does, with its PRODUCER span: what a release sends a
// continuation with. A failure is a *sendError naming what refused it.
func (h *Handler) SendFunc() jobs.SendFunc {
	return func(ctx context.Context, j jobs.Job) error {
		if what, err := h.hand(ctx, &j); err != nil {
			return &sendError{what: what, err: err}
		}
		return nil
	}
}
