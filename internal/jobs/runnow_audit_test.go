//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

// schedules is a scheduler's one-time schedules, by job id: Delete reports
// whether one existed and removes it, as the scheduler does.
type schedules map[string]bool

// schedulesMu guards every schedules: a sweep deletes from several shards
// at once.
var schedulesMu sync.Mutex

func (s schedules) Delete(_ context.Context, id string) (bool, error) {
	schedulesMu.Lock()
	defer schedulesMu.Unlock()
	existed := s[id]
	delete(s, id)
	return existed, nil
}

// TestAuditRunNowOfAnEnqueuedJobNeverDropsIt: run-now of a job whose run
// time has passed but whose one-time schedule has not fired yet (the
// scheduler fires within about a minute, and retries a failed delivery for
// up to 24 hours; the job already reads Enqueued).
//
// RunNow's Enqueued branch deletes the schedule first and only then sends
// the message. When the send fails (SQS throttled, the queue's key
// unavailable) the run-now answers an error, but the schedule is already
// gone: the job has neither a schedule nor a message. Its retry finds no
// schedule and a record that no longer waits and answers "already-sent"
// without sending, the job reads Enqueued (a false state) until it reads
// Expired four days later: it is lost.
//
// A fix must guarantee what the Scheduled branch does: no order of
// failures leaves a job with neither a schedule nor a message (send first,
// then delete; or, when the delete came first, a failed send is retried by
// the next run-now instead of "already-sent").
func TestAuditRunNowOfAnEnqueuedJobNeverDropsIt(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	s := schedules{}
	f.Store.Schedules = s
	j := jobstest.Enqueue(t, f.Store, scheduled(t, f, "late-firing", 2*time.Hour))
	s[j.ID] = true // the enqueue made its schedule
	f.Clock.Advance(2*time.Hour + time.Minute)
	if got := jobstest.Get(t, f.Store, j.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("past its run time, its schedule not fired yet, the job reads %s; want Enqueued", got.State)
	}
	var sent int
	sendErr := errors.New("queue throttled")
	send := func(context.Context, jobs.Job) error {
		if sendErr != nil {
			return sendErr
		}
		sent++
		return nil
	}
	if _, _, err := f.Store.RunNow(ctx, j.ID, send); err == nil {
		t.Fatal("run now succeeded although its send failed")
	}
	sendErr = nil
	_, outcome, err := f.Store.RunNow(ctx, j.ID, send)
	if s[j.ID] || sent > 0 {
		return // the job still waits in its schedule, or was sent: it holds
	}
	t.Fatalf("after a run-now whose send failed, the job has no schedule (deleted before the send) and its retry answered %s, %v "+
		"without sending: no message and no schedule, the job is lost (it reads %s)", outcome, err, jobstest.Get(t, f.Store, j.ID).State)
}

// oldScheduled is a job due ahead as a release before 6313c1c enqueued
// it: waiting in a one-time schedule, its message without runAt (a job
// still waiting across the deploy; it can wait a year).
func oldScheduled(t *testing.T, f *jobstest.World, key string, ahead time.Duration) jobs.Job {
	t.Helper()
	j := f.Job("email.welcome.v1", "c", key, ahead)
	env := message.Envelope{V: message.Version, MessageID: j.ID, Type: j.Type, Key: key, CorrelationID: j.CorrelationID,
		Args: map[string]string{"userId": "u-1"}, EnqueuedAt: j.CreatedAt}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	j.Message = string(body)
	return j
}

// TestAuditRunNowOfAJobFromBeforeTheDeployKeepsItsDue: a job enqueued
// before the release that put runAt in the envelope, due in 200 days, run
// now after the deploy.
//
// recordRunNow overwrites the record's runAt with now, and the message
// (from before the deploy) carries no runAt, so Job.Due() forgets the 200
// days: the worker claims the marker with a zero due (30 days), while the
// record keeps its old TTL (219 days). What goes wrong: (1) from day 31
// GET reads Expired for a job that Succeeded (a false state, for months),
// and a DELETE answers "Expired"; (2) should its schedule survive (delete
// failed and the sweep could not delete it, or its list entry was lost)
// the firing on day 200 finds no marker and runs the job a second time;
// (3) a cancel after the run-now tombstones it for 30 days only.
//
// A fix must guarantee that the run time a job's guards outlive survives a
// run-now for every job, including those whose message predates runAt:
// keep the original runAt on the record (a dueAt that run-now never
// overwrites, read by Due), or add runAt to the message run-now sends.
func TestAuditRunNowOfAJobFromBeforeTheDeployKeepsItsDue(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	f.Store.Schedules = schedules{}
	j := jobstest.Enqueue(t, f.Store, oldScheduled(t, f, "pre-deploy", 200*day))
	due := j.RunAt
	var sentMsg jobs.Job
	if _, _, err := f.Store.RunNow(ctx, j.ID, func(_ context.Context, r jobs.Job) error { sentMsg = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := jobstest.Get(t, f.Store, j.ID); !got.Due().Equal(due) {
		t.Errorf("after run now the job is due %s for its guards; want still %s (its schedule was for then)", got.Due(), due)
	}
	// The worker runs the copy run-now sent, with the due its envelope
	// carries, as runner.Runner does (it.env.RunAt).
	env, err := message.Decode([]byte(sentMsg.Message))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Markers.Lease(ctx, j.MarkerKey(), engine.Mark{Owner: "w", Until: f.Clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Markers.Claim(ctx, j.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(f.Clock.Now(), env.RunAt, engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(31 * day)
	if got := jobstest.Get(t, f.Store, j.ID); got.State != jobs.StateSucceeded {
		t.Errorf("31 days after it ran, the job reads %s; want Succeeded (its record is kept until %s)", got.State,
			time.Unix(lifetime.ActiveRecord(due).Unix(), 0).UTC().Format(time.DateOnly))
	}
	f.Clock.Advance(due.Sub(f.Clock.Now()) + time.Minute)
	if _, ok, err := f.Markers.Peek(ctx, j.MarkerKey()); err != nil || !ok {
		t.Errorf("when its old schedule fires (day 200) the job's marker is gone (%v): a schedule that survived its run-now (delete failed, sweep failing) runs the job a second time", err)
	}
}

// TestAuditAScheduledJobDeliveredLateDoesNotReadExpired: a job due in two
// hours waits in a one-time schedule. EventBridge Scheduler retries a
// delivery it could not make for up to 24 hours (the schedule has no
// RetryPolicy: the default MaximumEventAgeInSeconds 86400, which
// lifetime.SchedulerRetryWindow models), so its message can enter its queue
// as late as runAt + 1 day and wait there 4 days: it can still run until
// runAt + 5 days (lifetime.ActiveRecord counts that way).
//
// jobs.Derive reads Expired from runAt + QueueRetention (4 days) for any
// job without a marker. What goes wrong between day 4 and day 5: GET reads
// Expired (docs/api.md: "its message can no longer exist") while its
// message is in the queue and will run; a DELETE answers 409 Expired, so
// the caller cannot stop it; and enqueue treats Expired as ended, so a new
// request for the same key makes a second job beside the one still to run.
//
// A fix must guarantee that a job that may have a one-time schedule
// (MayHaveSchedule) never reads Expired before runAt +
// SchedulerRetryWindow + QueueRetention: the same instant lifetime uses.
func TestAuditAScheduledJobDeliveredLateDoesNotReadExpired(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	f.Store.Schedules = schedules{}
	j := jobstest.Enqueue(t, f.Store, scheduled(t, f, "fired-late", 2*time.Hour))
	f.Clock.Advance(2*time.Hour + jobs.QueueRetention + time.Hour) // day 4 + 1 h: the late copy is still queued
	if got := jobstest.Get(t, f.Store, j.ID); got.State == jobs.StateExpired {
		t.Errorf("%s after its run time the scheduled job reads Expired, but a delivery the scheduler retried for up to %s can still be in its queue until %s",
			jobs.QueueRetention+time.Hour, lifetime.SchedulerRetryWindow, lifetime.SchedulerRetryWindow+jobs.QueueRetention)
	}
	if got, err := f.Store.Cancel(ctx, j.ID, "c"); err != nil {
		t.Errorf("DELETE of the job whose late copy is still queued: %s, %v; want Cancelled (the copy then finds a tombstone)", got.State, err)
	}
}
