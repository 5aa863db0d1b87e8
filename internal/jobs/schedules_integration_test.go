//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// deleter is a schedule deleter that records what it was asked and fails
// while err is set.
type deleter struct {
	asked []string
	err   error
}

func (d *deleter) Delete(_ context.Context, id string) (bool, error) {
	d.asked = append(d.asked, id)
	return d.err == nil, d.err
}

// A cancel deletes the schedule of a job due beyond SQS's delay before it
// tombstones it; when the schedule cannot be deleted nothing is cancelled
// (the retry does it). A job within SQS's delay has no schedule to delete.
func TestCancelDeletesTheSchedule(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	far := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "far", 2*time.Hour))
	near := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "near", jobs.MaxQueueDelay))

	if _, err := f.Store.Cancel(ctx, far.ID, "c"); err == nil {
		t.Fatal("cancel succeeded although its schedule could not be deleted")
	}
	if j := jobstest.Get(t, f.Store, far.ID); j.State != jobs.StateScheduled {
		t.Fatalf("after the failed cancel the job reads %s; want Scheduled, untouched", j.State)
	}
	d.err = nil
	if j, err := f.Store.Cancel(ctx, far.ID, "c"); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("cancel: %+v, %v", j, err)
	}
	if j, err := f.Store.Cancel(ctx, near.ID, "c"); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("cancel of a job in SQS's delay: %+v, %v", j, err)
	}
	if len(d.asked) != 2 || d.asked[0] != far.ID || d.asked[1] != far.ID {
		t.Fatalf("schedules deleted %v; want the far job's twice (failed, then done), never the near one's", d.asked)
	}
}
