//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

const day = 24 * time.Hour

// scheduled is a job due in ahead whose message carries its runAt, as the
// enqueue function builds one that waits in a one-time schedule.
func scheduled(t *testing.T, f *jobstest.World, key string, ahead time.Duration) jobs.Job {
	t.Helper()
	j := f.Job("email.welcome.v1", "c", key, ahead)
	env := message.Envelope{V: message.Version, MessageID: j.ID, Type: j.Type, Key: key, CorrelationID: j.CorrelationID,
		Args: map[string]string{"userId": "u-1"}, EnqueuedAt: j.CreatedAt, RunAt: j.RunAt}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	j.Message = string(body)
	return j
}

// A cancel whose schedule delete failed leaves the job on the sweep's list,
// and the sweep deletes the schedule later without a client's retry; then
// the list is empty. The tombstone meanwhile outlives the schedule's
// firing, however far ahead: a firing 200 days on still finds it.
func TestCancelWhoseDeleteFailedIsSweptAndGuarded(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	far := jobstest.Enqueue(t, f.Store, scheduled(t, f, "far", 200*day))
	if _, err := f.Store.Cancel(ctx, far.ID, "c"); err == nil {
		t.Fatal("cancel succeeded although its schedule could not be deleted")
	}
	// The caller gives up. A day later the sweep runs.
	f.Clock.Advance(day)
	d.err = nil
	rep, err := f.Store.SweepSchedules(ctx)
	if err != nil || rep.Listed != 1 || !slices.Equal(rep.Deleted, []string{far.ID}) {
		t.Fatalf("sweep = %+v, %v; want the far job's schedule deleted", rep, err)
	}
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("second sweep = %+v, %v; want an empty list", rep, err)
	}
	// Had the schedule stayed, it would fire at its runAt: the tombstone
	// (and the record) are still there then, and past its last delivery.
	f.Clock.Advance(far.RunAt.Sub(f.Clock.Now()) + lifetime.SchedulerRetryWindow)
	m, ok, err := f.Markers.Peek(ctx, far.MarkerKey())
	if err != nil || !ok || m.State != "CANCELLED" || m.ExpiresAt.Before(lifetime.LastDelivery(far.RunAt)) {
		t.Fatalf("at the schedule's firing the tombstone is %+v (%v, %v); want CANCELLED until past its last delivery", m, ok, err)
	}
	if j := jobstest.Get(t, f.Store, far.ID); j.State != jobs.StateCancelled {
		t.Fatalf("at the schedule's firing the job reads %s; want Cancelled", j.State)
	}
}

// Run now of a job due in 300 days whose schedule delete failed: the job is
// sent, on the sweep's list, and swept later. Its guards are the run time
// its message carries, not the now it was sent at.
func TestRunNowWhoseDeleteFailedIsSwept(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	far := jobstest.Enqueue(t, f.Store, scheduled(t, f, "far", 300*day))
	send := func(context.Context, jobs.Job) error { return nil }
	if _, _, err := f.Store.RunNow(ctx, far.ID, send); err == nil {
		t.Fatal("run now succeeded although its schedule could not be deleted")
	}
	got := jobstest.Get(t, f.Store, far.ID)
	if got.State != jobs.StateEnqueued || !got.Due().Equal(far.RunAt) {
		t.Fatalf("after run now: %s due %s; want Enqueued, still due %s for its guards", got.State, got.Due(), far.RunAt)
	}
	d.err = nil
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || !slices.Equal(rep.Deleted, []string{far.ID}) {
		t.Fatalf("sweep = %+v, %v; want the run-now job's schedule deleted", rep, err)
	}
}

// A cancel that lands while the job is still Pending (its enqueue is about
// to create its schedule) finds no schedule, and keeps the job on the
// sweep's list: the sweep deletes what the enqueue made, and takes the job
// off only once no enqueue can make it any more.
func TestCancelOfAPendingJobStaysListedUntilItsEnqueueIsOver(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{}
	f.Store.Schedules = d
	pending := jobstest.Reserve(t, f.Store, scheduled(t, f, "racing", 40*day))
	if j, err := f.Store.Cancel(ctx, pending.ID, "c"); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("cancel: %+v, %v", j, err)
	}
	rep, err := f.Store.SweepSchedules(ctx)
	if err != nil || rep.Listed != 1 || !slices.Equal(rep.Kept, []string{pending.ID}) {
		t.Fatalf("sweep right after the cancel = %+v, %v; want the job kept on the list (its enqueue may still make the schedule)", rep, err)
	}
	f.Clock.Advance(jobs.DefaultPendingTimeout + time.Second)
	if _, err := f.Store.SweepSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("sweep after the pending timeout = %+v, %v; want it off the list", rep, err)
	}
	if len(d.asked) < 2 {
		t.Fatalf("schedule deletes %v; want the cancel's and the sweep's", d.asked)
	}
}

// A sweep takes on a window of its list a run, from where the last run
// stopped and round to the start: with five jobs listed and a window of
// two, three runs ask for every schedule, the third wrapping round, and
// the cursor moves before the run's work, so a run that dies midway does
// not hold the next one at the same place.
func TestSweepTakesOnAWindowFromWhereTheLastRunStopped(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	var ids []string
	for i := range 5 {
		j := jobstest.Enqueue(t, f.Store, scheduled(t, f, fmt.Sprintf("w-%d", i), 40*day))
		if _, err := f.Store.Cancel(ctx, j.ID, "c"); err == nil {
			t.Fatal("cancel succeeded although its schedule could not be deleted")
		}
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	f.Store.SweepWindow = 2
	var runs [][]string
	for range 3 {
		d.asked = nil
		rep, err := f.Store.SweepSchedules(ctx)
		if err == nil || rep.Listed != 5 {
			t.Fatalf("sweep = %+v, %v; want five listed and the deletes failing", rep, err)
		}
		runs = append(runs, d.asked)
	}
	want := [][]string{{ids[0], ids[1]}, {ids[2], ids[3]}, {ids[4], ids[0]}}
	if !slices.EqualFunc(runs, want, slices.Equal) {
		t.Fatalf("runs asked for %v; want %v", runs, want)
	}
}
