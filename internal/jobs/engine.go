package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
)

// RecordWriter is what the runner needs of the job records: Recorder's
// writes (a test's fake has the same methods).
type RecordWriter interface {
	MarkParked(ctx context.Context, jobID string) (State, error)
	MarkFailed(ctx context.Context, jobID string, f Failure) error
	RecordOutcome(ctx context.Context, jobID, outcome, reason string) error
	MarkUnclaimed(ctx context.Context, jobID, reason string) error
}

// ForEngine adapts w to the engine's JobRecorder: a job without a record is
// no error (ErrNotFound), nor is a record whose state refuses a park
// (ErrConflict), and a cancelled one is reported as such.
func ForEngine(w RecordWriter) engine.JobRecorder { return engineRecorder{w} }

type engineRecorder struct{ w RecordWriter }

func (r engineRecorder) MarkParked(ctx context.Context, jobID string) (bool, error) {
	prev, err := r.w.MarkParked(ctx, jobID)
	switch {
	case prev == StateCancelled:
		return true, nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict):
		return false, nil
	}
	return false, err
}

func (r engineRecorder) MarkFailed(ctx context.Context, jobID string, f Failure) error {
	return noRecordIsFine(r.w.MarkFailed(ctx, jobID, f))
}

func (r engineRecorder) RecordOutcome(ctx context.Context, jobID, outcome, reason string) error {
	return noRecordIsFine(r.w.RecordOutcome(ctx, jobID, outcome, reason))
}

func (r engineRecorder) MarkUnclaimed(ctx context.Context, jobID, reason string) error {
	return noRecordIsFine(r.w.MarkUnclaimed(ctx, jobID, reason))
}

func noRecordIsFine(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Reserver is what a tick's record needs of the job store: Store's Reserve
// and Promote (a test's fake has the same methods).
type Reserver interface {
	Reserve(ctx context.Context, job Job, policy contract.DuplicatePolicy) (Decision, error)
	Promote(ctx context.Context, job Job) error
}

// TicksForEngine adapts s to the engine's TickJobs: a tick's job is
// reserved under its derived id and key (after a Failed one of the key, a
// new tick runs again) and promoted, as the enqueue function does for a
// request.
func TicksForEngine(s Reserver) runner.TickJobs { return engineTicks{s} }

type engineTicks struct{ s Reserver }

func (t engineTicks) RecordTick(ctx context.Context, tj runner.TickJob) (runner.TickDecision, error) {
	job := Job{ID: tj.ID, Caller: tj.Caller, Type: tj.Type, Key: tj.Key, Queue: tj.Queue,
		CorrelationID: tj.CorrelationID, TraceID: tj.TraceID, Message: tj.Message, CreatedAt: tj.At, RunAt: tj.At}
	d, err := t.s.Reserve(ctx, job, contract.AllowAfterFailed)
	switch {
	case err != nil:
		return runner.TickDecision{}, err
	case d.Outcome == Busy:
		return runner.TickDecision{Busy: true}, nil
	case !d.Own:
		return runner.TickDecision{HolderID: d.Job.ID}, nil
	case d.Outcome == Reserved || d.Outcome == Resume:
		if err := t.s.Promote(ctx, d.Job); err != nil {
			return runner.TickDecision{}, fmt.Errorf("promote the tick's job: %w", err)
		}
		return runner.TickDecision{Own: true, Recorded: true}, nil
	}
	return runner.TickDecision{Own: true}, nil
}
