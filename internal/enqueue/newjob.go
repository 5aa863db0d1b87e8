package enqueue

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// newJob is the job request in of type jt makes for caller under job id
// id, enqueued at now: its envelope encoded as its message, due at its
// runAt (a job due later than SQS can delay a message carries its runAt in
// every copy, so its guards outlive its schedule's firing). A message that
// cannot be encoded is a problem.
func (h *Handler) newJob(ctx context.Context, log *slog.Logger, jt message.JobType, in contract.Body, caller, id, fingerprint, corr, trace string,
	now time.Time,
) (jobs.Job, *Problem) {
	due := runAt(in, now)
	env := message.Envelope{
		V: message.Version, MessageID: id, Type: jt.Name, Key: in.Key, CorrelationID: corr, Args: in.Args, EnqueuedAt: now,
	}
	if due.Sub(now) > jobs.MaxQueueDelay {
		env.RunAt = due.Truncate(time.Millisecond)
	}
	body, err := env.Encode()
	if err != nil {
		return jobs.Job{}, invalidProblem(log, "encode", "the job message", err)
	}
	return jobs.Job{
		ID: id, Caller: caller, Type: jt.Name, Key: in.Key, Queue: string(jt.Queue), CorrelationID: corr,
		TraceID: jobTraceID(ctx, trace), Message: string(body), CreatedAt: now, RunAt: due, Fingerprint: fingerprint,
		After: in.After, AfterPolicy: in.AfterPolicy,
	}, nil
}

// runAt is when the job of body in, enqueued at now, is due: its runAt (now
// when that is past or less than RunNowWithin ahead), else now plus its
// delaySeconds.
func runAt(in contract.Body, now time.Time) time.Time {
	if in.RunAt.IsZero() {
		return now.Add(in.Delay)
	}
	if in.RunAt.Sub(now) < contract.RunNowWithin {
		return now
	}
	return in.RunAt
}

// sameJob reports whether job (found under the request's job id) is the job
// the request describes: the same request fingerprint when the record
// keeps one, else (a record written before fingerprints were kept) the
// same type, natural key and args. So a request that reuses its
// Idempotency-Key after its stored answer is gone, with another runAt or
// policy, is refused (422) like one within the day, never answered with the
// old job.
func sameJob(job, want jobs.Job) bool {
	if job.Fingerprint != "" && want.Fingerprint != "" {
		return job.Fingerprint == want.Fingerprint
	}
	if job.Type != want.Type || job.Key != want.Key {
		return false
	}
	if job.Message == "" {
		return true
	}
	stored, err := message.Decode([]byte(job.Message))
	wanted, werr := message.Decode([]byte(want.Message))
	return err == nil && werr == nil && maps.Equal(stored.Args, wanted.Args)
}
