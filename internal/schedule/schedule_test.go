package schedule

import (
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

// at() is UTC to the second, rounded up: a job never runs before its time.
func TestAtExpression(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), "at(2026-12-03T09:00:00)"},
		{time.Date(2026, 12, 3, 10, 0, 0, 0, berlin), "at(2026-12-03T09:00:00)"},
		{time.Date(2026, 12, 3, 9, 0, 0, 1, time.UTC), "at(2026-12-03T09:00:01)"},
		{time.Date(2026, 12, 31, 23, 59, 59, 500e6, time.UTC), "at(2027-01-01T00:00:00)"},
	} {
		if got := AtExpression(tc.in); got != tc.want {
			t.Errorf("AtExpression(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A job's queue must be known: a schedule without a target is refused
// before any call.
func TestInputNeedsTheQueue(t *testing.T) {
	s := New(nil, Config{Group: "g", RoleARN: "r", QueueARNs: map[message.Queue]string{contract.QueueDefault: "arn:d"}})
	if _, err := s.Input(Job{ID: "j", Queue: contract.QueueBulk, RunAt: time.Now()}); err == nil {
		t.Fatal("a schedule for a queue without an ARN was built")
	}
	in, err := s.Input(Job{ID: "j", Queue: contract.QueueDefault, Body: "{}", RunAt: time.Now()})
	if err != nil || in.Target.DeadLetterConfig != nil || *in.Target.Arn != "arn:d" {
		t.Fatalf("input %+v, %v; want the default queue and no DLQ when none is configured", in, err)
	}
}

// Every one-time schedule says how long the scheduler retries a delivery
// its queue refused: the retry window every guard's lifetime counts with
// (lifetime.SchedulerRetryWindow), and MaxRetryAttempts, so that "how late
// can it arrive" has one answer and the guards outlive it. Without a
// policy the service's defaults apply, which nothing here checks.
func TestEveryScheduleHasTheRetryPolicyTheLifetimesCountWith(t *testing.T) {
	s := New(nil, Config{Group: "g", RoleARN: "r", QueueARNs: map[message.Queue]string{contract.QueueDefault: "arn:d"}, DLQARN: "arn:dlq"})
	in, err := s.Input(Job{ID: "j", Queue: contract.QueueDefault, Body: "{}", RunAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	rp := in.Target.RetryPolicy
	if rp == nil || rp.MaximumEventAgeInSeconds == nil || rp.MaximumRetryAttempts == nil {
		t.Fatalf("retry policy %+v; want both limits set", rp)
	}
	if got := time.Duration(*rp.MaximumEventAgeInSeconds) * time.Second; got != lifetime.SchedulerRetryWindow {
		t.Errorf("MaximumEventAgeInSeconds %v; want lifetime.SchedulerRetryWindow %v", got, lifetime.SchedulerRetryWindow)
	}
	if *rp.MaximumEventAgeInSeconds < 60 || *rp.MaximumEventAgeInSeconds > 86400 || *rp.MaximumRetryAttempts < 0 || *rp.MaximumRetryAttempts > 185 {
		t.Errorf("retry policy %d s, %d attempts: outside what the service takes (60-86400 s, 0-185)", *rp.MaximumEventAgeInSeconds, *rp.MaximumRetryAttempts)
	}
	if *rp.MaximumRetryAttempts != MaxRetryAttempts {
		t.Errorf("MaximumRetryAttempts %d; want %d", *rp.MaximumRetryAttempts, MaxRetryAttempts)
	}
}
