// Package operate is what an operator does to one job: cancel it, run it
// now, redrive its dead letter. jobctl and the local web view both act
// through it, so the two take the same path through the stores and say the
// same thing of what they did.
package operate

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// Sender sends a job's stored message to its queue (sqsqueue.Sender).
type Sender interface {
	Send(ctx context.Context, m sqsqueue.Message) error
}

// Operator acts on jobs as an operator: on anyone's job, without a caller.
// Each field serves the actions that name it; a nil one refuses them.
type Operator struct {
	// Jobs is the job store, with its Schedules (the one-time schedules
	// that cancel and run-now delete). Cancel and RunNow use it.
	Jobs *jobs.Store
	// Queue sends a job that runs now.
	Queue Sender
	// Redriver sends a dead letter back (Redrive).
	Redriver *deadletter.Redriver
}

// RefusedError is the error of an action the job's state forbids; its text
// says why, and what to do instead where there is something.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Result is what an action did: the job as it is now (Cancel, RunNow),
// what RunNow sent, the letter's redrive (Redrive), and all of it in words.
type Result struct {
	Job    jobs.Job
	RunNow jobs.RunNowOutcome
	Letter deadletter.Redriven
	Said   string
}

// ErrNotWired is the error of an action whose part the Operator lacks.
var ErrNotWired = errors.New("operate: not wired for this action")

// Cancel cancels job id if it has not run (jobs.Store.Cancel as an
// operator): its one-time schedule if it has one, the tombstone every
// worker sees, then the record. It returns the job and what was done, in
// words; a job that has run or runs now is a RefusedError, a job that does
// not exist matches jobs.ErrNotFound.
func (o Operator) Cancel(ctx context.Context, id string) (Result, error) {
	if o.Jobs == nil {
		return Result{}, ErrNotWired
	}
	j, err := o.Jobs.Cancel(ctx, id, "")
	switch {
	case errors.Is(err, jobs.ErrConflict):
		return Result{Job: j}, refused("job %s is %s: it can no longer be cancelled", id, j.State)
	case err != nil:
		return Result{Job: j}, err
	}
	return Result{Job: j, Said: "cancelled; it never runs"}, nil
}

// RunNow runs a waiting job at once (jobs.Store.RunNow): its one-time
// schedule is deleted and its message sent to its queue under its id.
// Running it twice sends one job. A job that is no longer waiting is a
// RefusedError.
func (o Operator) RunNow(ctx context.Context, id string) (Result, error) {
	if o.Jobs == nil || o.Queue == nil {
		return Result{}, ErrNotWired
	}
	j, outcome, err := o.Jobs.RunNow(ctx, id, func(ctx context.Context, j jobs.Job) error {
		return o.Queue.Send(ctx, sqsqueue.Message{Queue: j.Queue, Body: j.Message, Type: j.Type, CorrelationID: j.CorrelationID})
	})
	res := Result{Job: j, RunNow: outcome}
	switch {
	case errors.Is(err, jobs.ErrConflict):
		return res, refused("job %s is %s: only a job still waiting to run (Scheduled) can run now", id, j.State)
	case err != nil:
		return res, err
	}
	switch {
	case outcome == jobs.RunNowSent:
		res.Said = "its schedule is deleted and its message sent; it runs now"
	case outcome == jobs.RunNowResent && j.RunAt.Sub(j.CreatedAt) > engine.MaxDelay:
		res.Said = "it had no schedule left; its message is sent now under its id (it still runs once)"
	case outcome == jobs.RunNowResent:
		// Due within SQS's delay when it was made: it waited in its
		// queue, never in a schedule.
		res.Said = "it waits in its queue with a delay (it never had a schedule); its message is sent again now under its id (it still runs once)"
	default:
		res.Said = "already sent (by its schedule or an earlier run-now); nothing sent again"
	}
	return res, nil
}

// Redrive sends the dead letter of job id back to its queue under the same
// id and makes the job active again (deadletter.Redriver.Redrive, as
// `jobctl dlq redrive ID` does). A letter that cannot be redriven, or whose
// key a newer job holds, is a RefusedError, as is a job with no letter.
func (o Operator) Redrive(ctx context.Context, id string) (Result, error) {
	if o.Redriver == nil {
		return Result{}, ErrNotWired
	}
	letter, err := o.Redriver.Redrive(ctx, id)
	res := Result{Letter: letter}
	switch {
	case errors.Is(err, deadletter.ErrNotRedrivable):
		return res, refused("%v", err)
	case errors.Is(err, deadletter.ErrNotFound):
		return res, refused("job %s has no dead letter to redrive", id)
	case err != nil:
		return res, err
	}
	switch {
	case letter.Outcome == deadletter.Superseded:
		return res, refused("left alone: a newer job (%s) holds its key; `jobctl dlq redrive %s --force` redrives it anyway", letter.SupersededBy, id)
	case letter.Outcome == deadletter.Skipped:
		res.Said = "nothing done: " + letter.Skipped
	case letter.JobState == "":
		res.Said = fmt.Sprintf("redriven to the %s queue under the same id; it has no job record to reactivate", letter.Queue)
	default:
		res.Said = fmt.Sprintf("redriven to the %s queue under the same id; its job is active again", letter.Queue)
	}
	return res, nil
}

// Stack names what an Operator acts on: a stage's tables and its queues'
// URLs.
type Stack struct {
	Stage                                     string
	JobsTable, MarkersTable, DeadLettersTable string
	Queues                                    map[message.Queue]string
}

// New wires an Operator on a stack, from one AWS configuration: the job
// store with the stage's one-time schedules, the queues, and the redriver
// with the job lifecycle and the markers' reset (as `jobctl dlq redrive`
// has them).
func New(cfg aws.Config, s Stack, reg *message.Registry) Operator {
	db := dynamodb.NewFromConfig(cfg)
	store := jobs.NewStore(db, s.JobsTable, marker.NewStore(db, s.MarkersTable))
	store.Schedules = schedule.New(scheduler.NewFromConfig(cfg), schedule.Config{Group: schedule.GroupName(s.Stage)})
	queue := sqsqueue.New(sqs.NewFromConfig(cfg), envvar.ByName(s.Queues), "")
	r := deadletter.NewRedriver(deadletter.NewStore(db, s.DeadLettersTable), queue, reg)
	r.Jobs = jobs.NewLifecycle(db, s.JobsTable)
	r.Markers = marker.NewResetter(db, s.MarkersTable)
	return Operator{Jobs: store, Queue: queue, Redriver: r}
}
