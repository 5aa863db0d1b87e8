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
	"github.com/runstwice/runstwice/internal/contract"
	"log/slog"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
)

// ScheduleName is the recurring schedule that ticks the sweep.
const ScheduleName = "schedule-sweep"

// Tick is runstwice.schedule-sweep.v1, with one arg: the tick's scheduled
// time (hour, UTC, e.g. 20261202T1000Z), which is also its key, so every
// hour is a job of its own. It is on by default (deleting the schedule of
// an ended job is always safe) and, like every tick type, skips while its
// switch is off: the next hour's tick tries again.
var Tick = engine.JobType{
	Name:             "runstwice.schedule-sweep.v1",
	Args:             []engine.ArgSpec{{Name: "hour", Format: engine.FormatID, Required: true, MaxLen: 16}},
	Queue:            contract.QueueDefault,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "schedule-sweep",
	KeyArgs:          []string{"hour"},
	WhileOff:         engine.Skip,
	TickArgs: func(at time.Time) map[string]string {
		return map[string]string{"hour": at.UTC().Format("20060102T1504Z")}
	},
}

// Types returns the sweep's declaration, for the registry
// (internal/jobtypes).
func Types() []engine.JobType { return []engine.JobType{Tick} }

// Sweeper sweeps the listed schedules (*jobs.Store is one, with its
// Schedules set).
type Sweeper interface {
	SweepSchedules(ctx context.Context) (jobs.SweepReport, error)
}

// Handlers returns the sweep's runner handler, keyed by type name, ready for
// engine.Config.Handlers.
func Handlers(s Sweeper) (map[string]engine.Handler, error) {
	if s == nil {
		return nil, errors.New("sweep: a Sweeper is required")
	}
	return map[string]engine.Handler{Tick.Name: handler{s}}, nil
}

type handler struct{ s Sweeper }

// Handle runs one sweep. A schedule that could not be deleted fails the
// job, so SQS retries it (and, after its receives, it is dead-lettered and
// alarmed like any job); what was deleted stays deleted.
func (h handler) Handle(ctx context.Context, job engine.Job) error {
	log := job.Logger
	if log == nil {
		log = slog.Default()
	}
	rep, err := h.s.SweepSchedules(ctx)
	log.Info("sweep: one-time schedules of ended jobs", "listed", rep.Listed, "deleted", len(rep.Deleted),
		"deletedJobIds", rep.Deleted, "kept", len(rep.Kept))
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}
