//go:build integration

package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// Edge 4: a Pending job ages from when its message is sent, not from its
// first reservation.
func TestLateResumeAgesFromItsSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		// retry is the request that comes back days later: the job's own
		// (same Idempotency-Key, so the same job id) or another one for
		// the same natural key.
		own bool
	}{
		{"its own request retried", true},
		{"another request for its key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := jobstest.New(t)
			ctx := context.Background()
			j := f.Reserve(t, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-late", 0))
			// Reserved, never sent (the request died), for longer than the
			// queue keeps a message.
			f.Clock.Advance(jobs.QueueRetention + 6*time.Hour)
			if got := f.Get(t, j.ID); got.State != jobs.StatePending {
				t.Fatalf("an unsent job after %s reads %s; want Pending (a retry resumes it)", jobs.QueueRetention, got.State)
			}
			retry := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-late", 0)
			if tc.own {
				retry.ID, retry.Message = j.ID, j.Message
			}
			d, err := f.Store.Reserve(ctx, retry, contract.AllowAfterFailed)
			if err != nil || d.Outcome != jobs.Resume || d.Job.ID != j.ID {
				t.Fatalf("late retry = %v (%s), %v; want a resume of %s, which sends it", d.Outcome, d.Job.State, err, j.ID)
			}
			sentAt := f.Clock.Now()
			if err := f.Store.Promote(ctx, d.Job); err != nil {
				t.Fatal(err)
			}
			// Two hours later its message is still queued: it is Enqueued,
			// and its key admits no second job.
			f.Clock.Advance(2 * time.Hour)
			got := f.Get(t, j.ID)
			if got.State != jobs.StateEnqueued || !got.RunAt.Equal(sentAt) {
				t.Fatalf("2 h after the late send: %s, runAt %s; want Enqueued, runAt %s", got.State, got.RunAt, sentAt)
			}
			twin := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-late", 0)
			if d, err := f.Store.Reserve(ctx, twin, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != j.ID {
				t.Fatalf("a new request for the key = %v, %v; want a duplicate of %s", d.Outcome, err, j.ID)
			}
			// The key lives as long as the job from its send: past the
			// first life the reservation gave record and pointer.
			f.Clock.Advance(jobs.TerminalRetention + 2*time.Hour)
			if d, err := f.Store.Reserve(ctx, twin, contract.RejectAlways); err != nil || d.Job.ID != j.ID {
				t.Fatalf("after the reservation's first life: %v (%s), %v; want the key still naming %s", d.Outcome, d.Job.ID, err, j.ID)
			}
			// It expires from its send, not before.
			if got := f.Get(t, j.ID); got.State != jobs.StateExpired {
				t.Fatalf("long after its send, never run: %s; want Expired", got.State)
			}
		})
	}
}
