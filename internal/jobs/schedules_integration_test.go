//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// deleter is a schedule deleter that records what it was asked and fails
// while err is set.
type deleter struct {
	mu    sync.Mutex
	asked []string
	err   error
}

func (d *deleter) Delete(_ context.Context, id string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, id)
	return d.err == nil, d.err
}

// A cancel tombstones a job due beyond SQS's delay, then deletes its
// schedule. When the schedule cannot be deleted the job is cancelled anyway
// (its schedule could only fire a message its workers drop), the cancel
// says so, and the retry deletes it: no failure part-way leaves a job that
// reads Scheduled with no schedule behind it. A job within SQS's delay has
// no schedule to delete.
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
	if j := jobstest.Get(t, f.Store, far.ID); j.State != jobs.StateCancelled {
		t.Fatalf("after the cancel whose schedule delete failed the job reads %s; want Cancelled (the tombstone decides)", j.State)
	}
	d.err = nil
	if j, err := f.Store.Cancel(ctx, far.ID, "c"); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("cancel again: %+v, %v", j, err)
	}
	if j, err := f.Store.Cancel(ctx, near.ID, "c"); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("cancel of a job in SQS's delay: %+v, %v", j, err)
	}
	if len(d.asked) != 2 || d.asked[0] != far.ID || d.asked[1] != far.ID {
		t.Fatalf("schedules deleted %v; want the far job's twice (failed, then done), never the near one's", d.asked)
	}
}

// Run now sends a scheduled job before it deletes its schedule: a send that
// fails leaves the job Scheduled with its schedule, and a schedule that
// cannot be deleted fails the run after the send, though the job reads
// Enqueued (the schedule fires once more, a copy the marker drops). No
// order of failures leaves a job with neither a message nor a schedule.
func TestRunNowSendsBeforeItDeletesTheSchedule(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{}
	f.Store.Schedules = d
	var sent []string
	sendErr := errors.New("queue down")
	send := func(_ context.Context, j jobs.Job) error {
		if sendErr != nil {
			return sendErr
		}
		sent = append(sent, j.ID)
		return nil
	}
	far := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "far", 2*time.Hour))

	if _, _, err := f.Store.RunNow(ctx, far.ID, send); err == nil {
		t.Fatal("run now succeeded although its send failed")
	}
	if len(d.asked) != 0 {
		t.Fatalf("schedule deleted %v before the message was sent; want it kept", d.asked)
	}
	if j := jobstest.Get(t, f.Store, far.ID); j.State != jobs.StateScheduled {
		t.Fatalf("after the failed send the job reads %s; want Scheduled, untouched", j.State)
	}

	sendErr, d.err = nil, errors.New("scheduler down")
	if _, _, err := f.Store.RunNow(ctx, far.ID, send); err == nil {
		t.Fatal("run now succeeded although its schedule could not be deleted")
	}
	if j := jobstest.Get(t, f.Store, far.ID); j.State != jobs.StateEnqueued || len(sent) != 1 {
		t.Fatalf("after the failed delete the job reads %s with %d sends; want Enqueued, sent once", j.State, len(sent))
	}

	d.err = nil
	if j, outcome, err := f.Store.RunNow(ctx, far.ID, send); err != nil || outcome != jobs.RunNowAlreadySent || j.State != jobs.StateEnqueued {
		t.Fatalf("run now again: %+v, %s, %v; want already sent, Enqueued", j, outcome, err)
	}
	if len(d.asked) != 1 || len(sent) != 1 {
		t.Fatalf("schedule deletes %v, sends %v; want the one failed delete and the one send", d.asked, sent)
	}
}
