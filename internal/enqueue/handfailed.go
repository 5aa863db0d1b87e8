package enqueue

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
)

// scheduleQuotaDetail is the detail of a 503 schedule-quota-exceeded: what
// happened, and what the caller and an operator can do. It invites no
// automatic retry: no retry can succeed until someone acts.
const scheduleQuotaDetail = "the account's EventBridge Scheduler quota of schedules is reached, so no job due later " +
	"than 15 minutes can be scheduled; do not retry automatically: send a runAt within 15 minutes, or ask an operator " +
	"to raise the quota (Service Quotas, EventBridge Scheduler, Schedules) or let schedules fire, then retry with " +
	"the same Idempotency-Key"

// handFailed is the answer when hand could not give the job's message to
// what (the job queue, the scheduler): the job stays Pending (no record
// claims it is queued or scheduled) and the key stays retryable.
//
// A failure a retry can mend is a 503 service-unavailable with
// Retry-After: 1. The account's schedule quota reached is not one: it is a
// 503 schedule-quota-exceeded without Retry-After, which the producer
// client does not retry, logged as an alert and counted as
// ScheduleQuotaExceeded (an alarm-able metric).
func (h *Handler) handFailed(log *slog.Logger, job jobs.Job, what string, err error) *Problem {
	if errors.Is(err, schedule.ErrQuotaExceeded) {
		log.Error("enqueue: the account's schedule quota is reached; every job due later than 15 minutes is refused until it is raised or schedules fire",
			"alert", true, "to", what, obs.KeyError, obs.Redact(err),
			"hint", "raise the quota Schedules of EventBridge Scheduler in Service Quotas; jobctl schedules list shows the schedules that hold it")
		h.Metrics.Count(obs.ScheduleQuotaExceeded, job.Type, 1)
		h.Metrics.Flush()
		return newProblem(http.StatusServiceUnavailable, ProblemScheduleQuota, scheduleQuotaDetail)
	}
	log.Warn("enqueue: send failed; the key stays retryable", "to", what, obs.KeyError, obs.Redact(err))
	p := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, what+" did not accept the message; retry with the same Idempotency-Key")
	p.retryAfter = time.Second
	return p
}
