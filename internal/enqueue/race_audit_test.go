//go:build integration

package enqueue_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// beforeCreate is the stack's scheduler with a hook that runs before each
// CreateSchedule: what happens to the job between its reservation and its
// schedule.
type beforeCreate struct {
	enqueue.Schedules
	hook func(schedule.Job)
}

func (b beforeCreate) Create(ctx context.Context, j schedule.Job) error {
	b.hook(j)
	return b.Schedules.Create(ctx, j)
}

// TestAuditCancelRacingAScheduledEnqueueOnMoto (regression; passes): the
// race of issue 28 item 2 on the real tables and moto's scheduler, not the
// fakes. A DELETE lands between the reservation of a job due in 200 days
// and its CreateSchedule: the cancel tombstones the Pending job, finds no
// schedule and keeps the job on the sweep's list; the enqueue then makes
// the schedule, its promotion fails its condition (the record is
// Cancelled), and it deletes the schedule itself and answers Cancelled.
// What must hold: no schedule of the cancelled job is left, the answer and
// GET say Cancelled, the tombstone outlives the schedule's last possible
// delivery, and the sweep takes the job off its list once the enqueue can
// no longer make the schedule.
func TestAuditCancelRacingAScheduledEnqueueOnMoto(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	id := message.DeriveMessageID(alice, "race-1")
	s.h.Schedules = beforeCreate{Schedules: s.sched, hook: func(schedule.Job) {
		if j, err := s.jobs.Cancel(ctx, id, alice); err != nil || j.State != jobs.StateCancelled {
			t.Errorf("cancel between the reservation and the schedule: %+v, %v", j, err)
		}
	}}
	due := s.clock.Now().Add(200 * 24 * time.Hour).Truncate(time.Second)
	b := mustBody(t, call(t, s.h, post(welcome, "race-1", runAtBody(`"`+due.Format(time.RFC3339)+`"`))), http.StatusAccepted)
	if b.JobID != id || b.State != string(jobs.StateCancelled) {
		t.Fatalf("answer %+v; want %s Cancelled", b, id)
	}
	if _, ok := s.getSchedule(t, id); ok {
		t.Fatal("the cancelled job's schedule is left behind")
	}
	if j, err := s.jobs.Get(ctx, id); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("GET: %+v, %v; want Cancelled", j, err)
	}
	m, ok, err := s.markers.Peek(ctx, engine.Key{Type: welcome, JobID: id})
	if err != nil || !ok || m.State != engine.StateCancelled || m.ExpiresAt.Before(lifetime.LastDelivery(due)) {
		t.Fatalf("tombstone %+v (%v, %v); want CANCELLED until at least %s", m, ok, err, lifetime.LastDelivery(due))
	}
	// The replay says the same.
	if again := mustBody(t, call(t, s.h, post(welcome, "race-1", runAtBody(`"`+due.Format(time.RFC3339)+`"`))), http.StatusAccepted); again.State != b.State {
		t.Fatalf("replay %+v; want %+v", again, b)
	}
	s.jobs.Schedules = s.sched
	s.clock.Advance(jobs.DefaultPendingTimeout + time.Second)
	if _, err := s.jobs.SweepSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.jobs.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("sweep after the pending timeout: %+v, %v; want an empty list", rep, err)
	}
}

// TestAuditRelayedAgainAfterItsDedupJobEndedOnMoto (regression; passes):
// issue 28 item 5 on the real request layer and jobs table. Item B's first
// relay dedups onto the active job of item A (the same natural key); A's
// job then succeeds (its marker is claimed); B relayed again (a bisect, a
// relay crash, a producer's retried transaction) replays its first answer:
// no job of its own, no second message. Its stored decision lives at least
// lifetime.RelayDecision. And B rewritten with another runAt is 422.
func TestAuditRelayedAgainAfterItsDedupJobEndedOnMoto(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	relay := func(key, body string) enqueue.Answer {
		return s.h.EnqueueFor(ctx, enqueue.Request{Caller: "outbox:p", Type: welcome, IdempotencyKey: key, Body: []byte(body)})
	}
	body := `{"args":{"userId":"u-9"},"key":"welcome:u-9"}`
	a := relay("item-a", body)
	if a.Status != http.StatusAccepted {
		t.Fatalf("item A: %+v", a)
	}
	first := relay("item-b", body)
	if first.Status != http.StatusOK || first.JobID != a.JobID {
		t.Fatalf("item B: %+v; want 200 onto %s", first, a.JobID)
	}
	k := engine.Key{Type: welcome, JobID: a.JobID}
	if _, err := s.markers.Lease(ctx, k, engine.Mark{Owner: "w", Until: s.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.markers.Claim(ctx, k, engine.Mark{Owner: "w"}); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(lifetime.RelayDecision - time.Minute)
	if again := relay("item-b", body); again != first {
		t.Fatalf("item B relayed again after A's job ended: %+v; want its first answer %+v", again, first)
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 1 || envs[0].MessageID != a.JobID {
		t.Fatalf("messages %+v; want A's one", envs)
	}
	if _, err := s.jobs.Get(ctx, message.DeriveMessageID("outbox:p", "item-b")); err == nil {
		t.Fatal("item B relayed again made a job of its own")
	}
	at := s.clock.Now().Add(3 * time.Hour).Format(time.RFC3339)
	if r := relay("item-b", `{"args":{"userId":"u-9"},"key":"welcome:u-9","runAt":"`+at+`"}`); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("item B rewritten with a runAt: %+v; want 422", r)
	}
}
