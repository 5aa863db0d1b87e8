package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/message"
)

// RunNowOutcome says what RunNow did.
type RunNowOutcome int

// The outcomes of RunNow.
const (
	// RunNowSent: the job's one-time schedule was deleted and its message
	// sent now.
	RunNowSent RunNowOutcome = iota + 1
	// RunNowResent: the job had no schedule (an earlier run-now deleted it
	// and stopped before it sent, or the job waits in SQS's own delay) and
	// its record still says Scheduled for later: its message was sent now,
	// under its id, so whichever copy comes second finds it done.
	RunNowResent
	// RunNowAlreadySent: the job had no schedule and its record no longer
	// waits: its schedule fired, or an earlier run-now sent it. Nothing was
	// sent.
	RunNowAlreadySent
)

// String names the outcome for output.
func (o RunNowOutcome) String() string {
	switch o {
	case RunNowSent:
		return "sent"
	case RunNowResent:
		return "resent"
	case RunNowAlreadySent:
		return "already-sent"
	}
	return "unknown"
}

// SendFunc sends job j's message (j.Message, under its id) to its queue
// now, without a delay.
type SendFunc func(ctx context.Context, j Job) error

// RunNow runs a waiting job at once, as an operator asks: it sends its
// message with send, records the job Enqueued with now as its run time, and
// deletes the job's one-time schedule (Schedules). A Scheduled job is sent
// before its schedule is deleted, so a failure part-way never leaves a job
// with neither: a send that fails leaves the schedule, and a schedule that
// cannot be deleted after the send fails the run, though the job is sent
// and recorded (the schedule fires once more at the old run time, a copy
// the job's marker drops, and deletes itself after it). Running it twice
// sends one job: the second finds no schedule and a record that no longer
// waits (RunNowAlreadySent); a job whose schedule was lost while it still
// reads Scheduled is sent again (RunNowResent), under the same id. Only a
// Scheduled or Enqueued job can run now; any other state is ErrConflict
// with the job. A job that does not exist is ErrNotFound.
func (s *Store) RunNow(ctx context.Context, jobID string, send SendFunc) (Job, RunNowOutcome, error) {
	rec, m, has, err := s.read(ctx, jobID)
	if err != nil {
		return Job{}, 0, err
	}
	j := s.view(rec, m, has)
	if j.State != StateScheduled && j.State != StateEnqueued {
		return j, 0, fmt.Errorf("%w: %s is %s", ErrConflict, jobID, j.State)
	}
	rec = rec.withDue()
	if j.State == StateScheduled || rec.stored == StateScheduled {
		// Sent first: the schedule goes only once the message is out. A
		// Scheduled job whose run time has passed (it reads Enqueued) may
		// still have its schedule, which fires within about a minute, or a
		// day late: it is sent too, never left to a schedule this deletes.
		if err := send(ctx, rec); err != nil {
			return j, 0, fmt.Errorf("jobs: run %s now: %w", jobID, err)
		}
		existed, err := s.dropSchedule(ctx, rec, false)
		if err != nil {
			return s.recordRunNow(ctx, j, rec, 0, fmt.Errorf("jobs: run %s now: sent, but its schedule could not be deleted (the schedule sweep deletes it; should it fire at %s first, the job's marker drops the copy): %w",
				jobID, rec.RunAt.UTC().Format(time.RFC3339), err))
		}
		outcome := RunNowSent
		if !existed {
			outcome = RunNowResent
		}
		return s.recordRunNow(ctx, j, rec, outcome, nil)
	}
	// Enqueued: sent already (by a run-now, or with no delay); only a
	// schedule still there (an earlier run-now's delete failed) is sent in
	// its place.
	existed, err := s.deleteSchedule(ctx, rec)
	if err != nil {
		return j, 0, fmt.Errorf("jobs: run %s now: %w", jobID, err)
	}
	if !existed {
		return j, RunNowAlreadySent, nil
	}
	if err := send(ctx, rec); err != nil {
		return j, 0, fmt.Errorf("jobs: run %s now: %w", jobID, err)
	}
	return s.recordRunNow(ctx, j, rec, RunNowSent, nil)
}

// withDue is j with its message carrying its run time, when it may wait in
// a one-time schedule and its message (from before messages carried one)
// does not: the copy run now sends, and the record after it, then keep the
// due the job's guards must outlive.
func (j Job) withDue() Job {
	if !j.MayHaveSchedule() || j.Message == "" {
		return j
	}
	env, err := message.Decode([]byte(j.Message))
	if err != nil || !env.RunAt.IsZero() {
		return j
	}
	env.RunAt = j.RunAt
	if b, err := env.Encode(); err == nil {
		j.Message = string(b)
	}
	return j
}

// recordRunNow records a job that RunNow sent as Enqueued, run now, with
// the message it sent (sent: the run time it carries is the due its guards
// keep), and answers with the job as it reads then, outcome and failure (a failure of
// the schedule's delete after the send; nil when all went well).
func (s *Store) recordRunNow(ctx context.Context, j, sent Job, outcome RunNowOutcome, failure error) (Job, RunNowOutcome, error) {
	jobID := j.ID
	now := s.now()
	upd := expression.Set(expression.Name(AttrState), expression.Value(StateEnqueued)).
		Set(expression.Name("runAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name("message"), expression.Value(sent.Message)).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli()))
	cond := expression.AttributeExists(expression.Name(AttrPK)).And(inStates(Sources(EventSent)))
	u, err := ddb.Update(s.table, keyAV(JobPK(jobID)), upd, cond, false)
	if err != nil {
		return j, 0, fmt.Errorf("jobs: run %s now: %w", jobID, err)
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	if err != nil && !ddb.IsConditionFailed(err) {
		// The message is sent; the record still says it waits, so a retry
		// sends it again under the same id.
		return j, 0, errors.Join(failure, fmt.Errorf("jobs: run %s now: record: %w", jobID, err))
	}
	// A record that moved on meanwhile (cancelled) keeps its story.
	// The job is sent whatever this read says: a failed read answers with
	// the job as it was found.
	if got, err := s.Get(ctx, jobID); err == nil {
		return got, outcome, failure
	}
	return j, outcome, failure
}
