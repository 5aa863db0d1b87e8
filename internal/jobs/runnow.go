package jobs

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/runstwice/runstwice/internal/ddb"
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

// RunNow runs a waiting job at once, as an operator asks: it deletes the
// job's one-time schedule (Schedules), sends its message with send, and
// records the job Enqueued with now as its run time. Running it twice sends
// one job: the second finds no schedule and a record that no longer waits
// (RunNowAlreadySent); a run stopped between the delete and the record
// sends again on its retry, under the same id, which the job's marker
// absorbs. Only a Scheduled or Enqueued job can run now; any other state is
// ErrConflict with the job. A job that does not exist is ErrNotFound.
func (s *Store) RunNow(ctx context.Context, jobID string, send SendFunc) (Job, RunNowOutcome, error) {
	rec, m, has, err := s.read(ctx, jobID)
	if err != nil {
		return Job{}, 0, err
	}
	j := s.view(rec, m, has)
	if j.State != StateScheduled && j.State != StateEnqueued {
		return j, 0, fmt.Errorf("%w: %s is %s", ErrConflict, jobID, j.State)
	}
	existed, err := s.deleteSchedule(ctx, rec)
	if err != nil {
		return j, 0, fmt.Errorf("jobs: run %s now: %w", jobID, err)
	}
	outcome := RunNowSent
	if !existed {
		if j.State != StateScheduled {
			return j, RunNowAlreadySent, nil
		}
		outcome = RunNowResent
	}
	if err := send(ctx, rec); err != nil {
		return j, 0, fmt.Errorf("jobs: run %s now: %w", jobID, err)
	}
	now := s.now()
	upd := expression.Set(expression.Name(AttrState), expression.Value(StateEnqueued)).
		Set(expression.Name("runAt"), expression.Value(now.UnixMilli())).
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
		return j, 0, fmt.Errorf("jobs: run %s now: record: %w", jobID, err)
	}
	// A record that moved on meanwhile (cancelled) keeps its story.
	// The job is sent whatever this read says: a failed read answers with
	// the job as it was found.
	if got, err := s.Get(ctx, jobID); err == nil {
		return got, outcome, nil
	}
	return j, outcome, nil
}
