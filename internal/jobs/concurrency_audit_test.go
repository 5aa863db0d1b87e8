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
)

// lockedSchedules is schedules safe for concurrent callers.
type lockedSchedules struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *lockedSchedules) Delete(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	existed := s.ids[id]
	delete(s.ids, id)
	return existed, nil
}

func (s *lockedSchedules) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// TestAuditConcurrentCancelRunNowAndSweep (regression; passes): the worst
// operator and the worst caller at once. A job due in 90 days waits in its
// schedule; a DELETE, a `jobctl jobs run-now` and the hourly sweep run
// concurrently on it, then a worker gets every message run-now sent (and
// the schedule's firing, should the schedule remain). What must hold every
// time: the DELETE answered Cancelled (nothing had run yet), the job's
// effect never runs, GET reads Cancelled, and after the sweep no schedule
// of it is left.
func TestAuditConcurrentCancelRunNowAndSweep(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	s := &lockedSchedules{ids: map[string]bool{}}
	f.Store.Schedules = s
	for i := range 12 {
		j := jobstest.Enqueue(t, f.Store, scheduled(t, f, "race-"+string(rune('a'+i)), 90*day))
		s.mu.Lock()
		s.ids[j.ID] = true
		s.mu.Unlock()
		var mu sync.Mutex
		var sent []jobs.Job
		send := func(_ context.Context, r jobs.Job) error { mu.Lock(); sent = append(sent, r); mu.Unlock(); return nil }
		var wg sync.WaitGroup
		var cancelled jobs.Job
		var cancelErr, runErr error
		wg.Add(3)
		go func() { defer wg.Done(); cancelled, cancelErr = f.Store.Cancel(ctx, j.ID, "c") }()
		go func() { defer wg.Done(); _, _, runErr = f.Store.RunNow(ctx, j.ID, send) }()
		go func() { defer wg.Done(); _, _ = f.Store.SweepSchedules(ctx) }()
		wg.Wait()
		if cancelErr != nil || cancelled.State != jobs.StateCancelled {
			t.Fatalf("round %d: DELETE answered %s, %v; want Cancelled (nothing had run)", i, cancelled.State, cancelErr)
		}
		if runErr != nil && !errors.Is(runErr, jobs.ErrConflict) {
			t.Fatalf("round %d: run-now: %v", i, runErr)
		}
		// The worker: every copy sent, and the schedule's firing if it is left.
		copies := len(sent)
		if s.has(j.ID) {
			copies++
		}
		for range copies {
			_, err := f.Markers.Lease(ctx, j.MarkerKey(), engine.Mark{Owner: "w", Until: f.Clock.Now().Add(time.Minute)})
			if err == nil {
				t.Fatalf("round %d: a copy of the cancelled job got its lease: its effect runs", i)
			}
			if !errors.Is(err, engine.ErrCancelled) {
				t.Fatalf("round %d: lease of a copy: %v; want ErrCancelled", i, err)
			}
		}
		if got := jobstest.Get(t, f.Store, j.ID); got.State != jobs.StateCancelled {
			t.Fatalf("round %d: GET reads %s; want Cancelled", i, got.State)
		}
	}
	f.Clock.Advance(time.Hour)
	if _, err := f.Store.SweepSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("after the sweep: %+v, %v; want an empty list", rep, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) != 0 {
		t.Fatalf("schedules left after the sweep: %v", s.ids)
	}
}
