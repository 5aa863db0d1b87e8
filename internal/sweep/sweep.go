// Package sweep is the schedule sweep, runstwice.schedule-sweep.v1: the
// tick type of the recurring schedule schedule-sweep (template.yaml,
// hourly). Its job deletes the one-time schedules that must not run — of
// jobs that were cancelled or run now, whose delete failed, was cut short
// by a crash, or raced the enqueue that made the schedule — so no schedule
// outlives its job unnoticed and `jobctl schedules list` shows none for an
// ended job. The ids come from the jobs table's sweep list, which cancel
// and run-now write (jobs.Store.SweepSchedules); until a schedule is gone,
// the job's marker, kept until the schedule's last firing, drops whatever
// it sends.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
)

// ScheduleName is the recurring schedule that ticks the sweep.
const ScheduleName = "schedule-sweep"

// Sweeper sweeps the listed schedules (*jobs.Store is one, with its
// Schedules set).
type Sweeper interface {
	SweepSchedules(ctx context.Context) (jobs.SweepReport, error)
}

// Handlers returns the sweep's runner handler, keyed by type name, ready for
// runner.Config.Handlers.
func Handlers(s Sweeper) (map[string]runner.Handler, error) {
	if s == nil {
		return nil, errors.New("sweep: a Sweeper is required")
	}
	return map[string]runner.Handler{contract.ScheduleSweep.Name: handler{s}}, nil
}

type handler struct{ s Sweeper }

// Handle runs one sweep. A schedule that could not be deleted fails the
// job, and so does a run that stopped (out of time) before it took on
// every listed job, so SQS retries it (and, after its receives, it is
// dead-lettered and alarmed like any job); what was deleted stays deleted,
// and the retry goes on from where the run stopped.
func (h handler) Handle(ctx context.Context, job runner.Job) error {
	log := job.Logger
	if log == nil {
		log = slog.Default()
	}
	rep, err := h.s.SweepSchedules(ctx)
	log.Info("sweep: one-time schedules of ended jobs", "listed", rep.Listed, "deleted", len(rep.Deleted),
		"deletedJobIds", rep.Deleted, "kept", len(rep.Kept), "unfinished", rep.Unfinished, "covered", rep.Covered)
	if rep.Unfinished {
		err = errors.Join(err, jobs.ErrSweepUnfinished)
	}
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}
