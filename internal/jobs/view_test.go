package jobs_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
)

// record decodes a stored job record with the given attributes over a
// plain Enqueued one created at created.
func record(t *testing.T, created time.Time, attrs map[string]any) jobs.Job {
	t.Helper()
	item := map[string]any{
		"pk": jobs.JobPK("j-1"), "jobId": "j-1", "caller": "c", "type": "email.welcome.v1", "key": "welcome:u-1",
		"state": string(jobs.StateEnqueued), "queue": "default", "correlationId": "corr", "message": "{}",
		"createdAt": created.UnixMilli(), "updatedAt": created.UnixMilli(), "runAt": created.UnixMilli(),
		"expiresAt": created.Add(30 * 24 * time.Hour).Unix(),
	}
	for k, v := range attrs {
		item[k] = v
	}
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		t.Fatal(err)
	}
	j, ok, err := jobs.DecodeRecord(av, created)
	if err != nil || !ok {
		t.Fatalf("decode: %v %v", ok, err)
	}
	return j
}

// TestViewFieldsFollowTheState: the fields every view shows of a job agree
// with the state View derives — attempts once a worker touched it, the
// past-tense reason of a park that is over, an updatedAt that moves when
// the state moves (also when the marker or the clock moved it), all in
// milliseconds, UTC.
func TestViewFieldsFollowTheState(t *testing.T) {
	created := time.Date(2026, 12, 1, 14, 1, 8, 640_000_000, time.UTC)
	later := func(d time.Duration) time.Time { return created.Add(d) }
	ms := func(d time.Duration) int64 { return later(d).UnixMilli() }
	// A claim's processedAt is kept to the nanosecond (RFC 3339 text).
	claimedAt := later(5*time.Second + 123_456_789)
	done := engine.Record{State: engine.StateDone, ProcessedAt: claimedAt}
	for _, tc := range []struct {
		name        string
		attrs       map[string]any
		m           *engine.Record
		now         time.Time
		state       jobs.State
		attempts    int
		reason      string
		updatedAt   time.Time
		lastOutcome string
		// history is the earlier outcomes the view shows, with reasons.
		history []string
	}{
		{name: "enqueued", state: jobs.StateEnqueued, updatedAt: created},
		{name: "scheduled, its run time passed", attrs: map[string]any{"state": "Scheduled", "runAt": ms(time.Minute)},
			now: later(2 * time.Minute), state: jobs.StateEnqueued, updatedAt: later(time.Minute)},
		{name: "parked", attrs: map[string]any{"state": "Parked", "lastOutcome": "parked", "lastReason": "its kill switch is off; it runs when the switch is on again", "updatedAt": ms(time.Second)},
			state: jobs.StateParked, attempts: 1, reason: "its kill switch is off; it runs when the switch is on again", updatedAt: later(time.Second), lastOutcome: "parked"},
		{name: "parked, then succeeded", attrs: map[string]any{"state": "Parked", "lastOutcome": "parked", "lastReason": "its kill switch is off; it runs when the switch is on again", "updatedAt": ms(time.Second)},
			m: &done, state: jobs.StateSucceeded, attempts: 1, updatedAt: claimedAt.Truncate(time.Millisecond), lastOutcome: "succeeded",
			history: []string{"parked: its kill switch is off; it runs when the switch is on again"}},
		{name: "parked, then went on (not yet run)", attrs: map[string]any{"state": "Parked", "lastOutcome": "parked", "lastReason": "its kill switch is off; it runs when the switch is on again", "updatedAt": ms(time.Second)},
			m: &engine.Record{State: engine.StateLeased, LeasedAt: later(3 * time.Second), LeaseUntil: later(time.Hour)}, now: later(4 * time.Second),
			state: jobs.StateProcessing, attempts: 1, updatedAt: later(3 * time.Second), history: []string{"parked: its kill switch is off; it runs when the switch is on again"}},
		{name: "succeeded", m: &done, state: jobs.StateSucceeded, attempts: 1, updatedAt: claimedAt.Truncate(time.Millisecond), lastOutcome: "succeeded"},
		{name: "no-op: its reason written after the claim", attrs: map[string]any{"lastOutcome": "noop", "lastReason": "no mail needed: user not found", "updatedAt": ms(6 * time.Second)},
			m: &done, state: jobs.StateSucceeded, attempts: 1, reason: "no mail needed: user not found", updatedAt: later(6 * time.Second), lastOutcome: "noop"},
		{name: "processing", m: &engine.Record{State: engine.StateLeased, LeasedAt: later(3 * time.Second), LeaseUntil: later(time.Hour)},
			now: later(4 * time.Second), state: jobs.StateProcessing, attempts: 1, updatedAt: later(3 * time.Second)},
		{name: "cancelled: a tombstone is no delivery", attrs: map[string]any{"state": "Cancelled", "lastOutcome": "cancelled", "lastReason": "cancelled by its caller", "updatedAt": ms(2 * time.Second)},
			m: &engine.Record{State: engine.StateCancelled, ProcessedAt: later(2*time.Second - time.Millisecond)}, state: jobs.StateCancelled,
			reason: "cancelled by its caller", updatedAt: later(2 * time.Second), lastOutcome: "cancelled"},
		{name: "failed", attrs: map[string]any{"state": "Failed", "attempts": 5, "lastOutcome": "dead-lettered", "lastReason": "exceeded maxReceiveCount", "updatedAt": ms(time.Minute), "failedAt": ms(time.Minute)},
			state: jobs.StateFailed, attempts: 5, reason: "exceeded maxReceiveCount", updatedAt: later(time.Minute), lastOutcome: "dead-lettered"},
		{name: "redriven, then succeeded", attrs: map[string]any{"attempts": 5, "lastOutcome": "redriven", "lastReason": "redriven by an operator after it was dead-lettered", "updatedAt": ms(time.Second)},
			m: &done, state: jobs.StateSucceeded, attempts: 5, updatedAt: claimedAt.Truncate(time.Millisecond), lastOutcome: "succeeded",
			history: []string{"redriven: redriven by an operator after it was dead-lettered"}},
		{name: "dead-lettered, redriven (its write retried), then succeeded", attrs: map[string]any{"attempts": 5, "lastOutcome": "redriven",
			"lastReason": "redriven by an operator after it was dead-lettered", "updatedAt": ms(3 * time.Second),
			"history": []map[string]any{
				{"at": ms(time.Second), "outcome": "dead-lettered", "reason": "exceeded maxReceiveCount"},
				{"at": ms(3 * time.Second), "outcome": "redriven", "reason": "redriven by an operator after it was dead-lettered"},
				{"at": ms(3 * time.Second), "outcome": "redriven", "reason": "redriven by an operator after it was dead-lettered"},
			}},
			m: &done, state: jobs.StateSucceeded, attempts: 5, updatedAt: claimedAt.Truncate(time.Millisecond), lastOutcome: "succeeded",
			history: []string{"dead-lettered: exceeded maxReceiveCount", "redriven: redriven by an operator after it was dead-lettered"}},
		{name: "failed again after a redrive: the last failure is the outcome", attrs: map[string]any{"state": "Failed", "attempts": 5,
			"lastOutcome": "dead-lettered", "lastReason": "still no such user", "updatedAt": ms(5 * time.Second), "failedAt": ms(5 * time.Second),
			"history": []map[string]any{
				{"at": ms(time.Second), "outcome": "dead-lettered", "reason": "no such user"},
				{"at": ms(3 * time.Second), "outcome": "redriven", "reason": "redriven by an operator after it was dead-lettered"},
				{"at": ms(5 * time.Second), "outcome": "dead-lettered", "reason": "still no such user"},
			}},
			state: jobs.StateFailed, attempts: 5, reason: "still no such user", updatedAt: later(5 * time.Second), lastOutcome: "dead-lettered",
			history: []string{"dead-lettered: no such user", "redriven: redriven by an operator after it was dead-lettered"}},
		{name: "expired", now: later(jobs.QueueRetention + time.Hour), state: jobs.StateExpired, updatedAt: later(jobs.QueueRetention)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := record(t, created, tc.attrs)
			var m engine.Record
			if tc.m != nil {
				m = *tc.m
			}
			now := tc.now
			if now.IsZero() {
				now = later(10 * time.Second)
			}
			got := jobs.View(j, m, tc.m != nil, now)
			if got.State != tc.state || got.Attempts != tc.attempts || got.LastReason != tc.reason || got.LastOutcome != tc.lastOutcome {
				t.Errorf("state %s attempts %d outcome %q reason %q; want %s %d %q %q",
					got.State, got.Attempts, got.LastOutcome, got.LastReason, tc.state, tc.attempts, tc.lastOutcome, tc.reason)
			}
			var history []string
			for _, h := range got.History {
				history = append(history, h.Outcome+": "+h.Reason)
			}
			if !slices.Equal(history, tc.history) {
				t.Errorf("history %q; want %q", history, tc.history)
			}
			if !got.UpdatedAt.Equal(tc.updatedAt) {
				t.Errorf("updatedAt %s; want %s", got.UpdatedAt.Format(time.RFC3339Nano), tc.updatedAt.Format(time.RFC3339Nano))
			}
			for name, ts := range map[string]time.Time{"createdAt": got.CreatedAt, "updatedAt": got.UpdatedAt, "runAt": got.RunAt} {
				if ts.Location() != time.UTC || !ts.Equal(ts.Truncate(time.Millisecond)) {
					t.Errorf("%s %s is not milliseconds, UTC", name, ts.Format(time.RFC3339Nano))
				}
			}
		})
	}
}

// The error class is the Failed state's: a job redriven from a failure
// reads no class while it is on its way or once it succeeded (its history
// keeps the failure), and a Failed job keeps it.
func TestErrorClassIsTheFailedStates(t *testing.T) {
	created := time.Date(2026, 12, 1, 14, 1, 8, 0, time.UTC)
	done := engine.Record{State: engine.StateDone, ProcessedAt: created.Add(time.Minute)}
	for _, tc := range []struct {
		name  string
		state string
		m     *engine.Record
		want  string
	}{
		{"failed", "Failed", nil, "permanent"},
		{"redriven, on its way", "Enqueued", nil, ""},
		{"redriven, then succeeded", "Enqueued", &done, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := record(t, created, map[string]any{"state": tc.state, "lastErrorClass": "permanent", "attempts": 5})
			var m engine.Record
			if tc.m != nil {
				m = *tc.m
			}
			if got := jobs.View(j, m, tc.m != nil, created.Add(time.Hour)); got.LastErrorClass != tc.want {
				t.Errorf("%s: lastErrorClass %q; want %q", got.State, got.LastErrorClass, tc.want)
			}
		})
	}
}
