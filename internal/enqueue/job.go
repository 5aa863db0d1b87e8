package enqueue

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// isJobID reports whether s has the form of a job id: a lower-case
// canonical UUID.
func isJobID(s string) bool { return message.CanonicalUUID(s) }

// checkJobID refuses a path id that is not a job id.
func checkJobID(jobID, corr string) (reply, bool) {
	if !isJobID(jobID) {
		p := newProblem(http.StatusBadRequest, ProblemValidation,
			"the path's jobId must be a lower-case canonical UUID, as POST returned it (e.g. /v1/jobs/6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33)")
		p.Errors = []message.FieldError{{Field: "path jobId", Reason: "must be a lower-case canonical UUID"}}
		return p.response(corr), false
	}
	return reply{}, true
}

func jobJSON(status int, job jobs.Job, corr string) reply {
	return reply{
		StatusCode: status,
		Headers:    map[string]string{HeaderContentType: ContentTypeJSON, HeaderCorrelationID: corr, "Cache-Control": "no-store"},
		Body:       mustJSON(job),
	}
}

// get serves GET /v1/jobs/{jobId}: the job to its own caller, 404 to anyone
// else.
func (h *Handler) get(ctx context.Context, log *slog.Logger, caller, jobID, corr string) reply {
	if resp, ok := checkJobID(jobID, corr); !ok {
		return resp
	}
	job, err := h.Jobs.Get(ctx, jobID)
	switch {
	case errors.Is(err, jobs.ErrNotFound) || (err == nil && job.Caller != caller):
		return newProblem(http.StatusNotFound, ProblemNotFound, "you have no job "+jobID).response(corr)
	case err != nil:
		log.Error("enqueue: get job", obs.KeyError, obs.Redact(err), obs.KeyJobID, jobID)
		return unavailable(corr)
	}
	return jobJSON(http.StatusOK, job, corr)
}

// cancel serves DELETE /v1/jobs/{jobId}: 202 with the job Cancelled (also
// when it already was), 409 with its state when it already ran (or is
// running), 404 for another caller's job or none.
func (h *Handler) cancel(ctx context.Context, log *slog.Logger, caller, jobID, corr string) reply {
	if resp, ok := checkJobID(jobID, corr); !ok {
		return resp
	}
	job, err := h.Jobs.Cancel(ctx, jobID, caller)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return newProblem(http.StatusNotFound, ProblemNotFound, "you have no job "+jobID).response(corr)
	case errors.Is(err, jobs.ErrConflict):
		p := newProblem(http.StatusConflict, ProblemNotCancellable, "job "+jobID+" is "+string(job.State)+" and can no longer be cancelled")
		p.State = string(job.State)
		return p.response(corr)
	case err != nil:
		log.Error("enqueue: cancel job", obs.KeyError, obs.Redact(err), obs.KeyJobID, jobID)
		return unavailable(corr)
	}
	log.Info("enqueue: job cancelled", obs.KeyJobID, jobID, obs.KeyMessageID, jobID, obs.KeyType, job.Type)
	return jobJSON(http.StatusAccepted, job, corr)
}
