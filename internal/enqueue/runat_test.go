package enqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

func runAtBody(at string) string {
	return fmt.Sprintf(`{"args":{"userId":"u-1"},"runAt":%s}`, at)
}

// The runAt rules: an RFC 3339 string with Z or an offset, at most 365
// days ahead, never together with delaySeconds. Each refusal names runAt.
func TestRunAtRules(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	jt, _ := contract.Registry().Lookup(welcome)
	for _, tc := range []struct {
		name, body string
		want       time.Time // zero: refused
		reason     string    // part of runAt's reason when refused
	}{
		{"UTC", runAtBody(`"2026-12-03T09:00:00Z"`), time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), ""},
		{"offset", runAtBody(`"2026-12-03T10:00:00+01:00"`), time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), ""},
		{"fractional seconds", runAtBody(`"2026-12-03T09:00:00.250Z"`), time.Date(2026, 12, 3, 9, 0, 0, 250e6, time.UTC), ""},
		{"in the past", runAtBody(`"2020-01-01T00:00:00Z"`), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"exactly 365 days ahead", runAtBody(`"2027-11-30T08:00:00Z"`), now.Add(365 * 24 * time.Hour), ""},
		{"a second more than 365 days", runAtBody(`"2027-11-30T08:00:01Z"`), time.Time{}, "at most 365 days ahead"},
		{"no offset", runAtBody(`"2026-12-03T09:00:00"`), time.Time{}, "with Z or an offset"},
		{"a date only", runAtBody(`"2026-12-03"`), time.Time{}, "RFC 3339"},
		{"a number", runAtBody(`1764489600`), time.Time{}, "as a string"},
		{"null", runAtBody(`null`), time.Time{}, "as a string"},
		{"with delaySeconds", `{"args":{"userId":"u-1"},"runAt":"2026-12-03T09:00:00Z","delaySeconds":5}`, time.Time{}, "together with delaySeconds"},
		{"with delaySeconds 0", `{"args":{"userId":"u-1"},"runAt":"2026-12-03T09:00:00Z","delaySeconds":0}`, time.Time{}, "together with delaySeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := contract.DecodeBodyAt(jt, []byte(tc.body), now)
			if !tc.want.IsZero() {
				if err != nil || !b.RunAt.Equal(tc.want) || b.RunAt.Location() != time.UTC || b.Delay != 0 {
					t.Fatalf("got %+v, %v; want runAt %s in UTC", b, err, tc.want)
				}
				return
			}
			var ve *message.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %+v, %v; want a validation error", b, err)
			}
			for _, f := range ve.Fields {
				if f.Field == "runAt" && strings.Contains(f.Reason, tc.reason) {
					return
				}
			}
			t.Fatalf("fields %+v; want runAt: ...%s...", ve.Fields, tc.reason)
		})
	}
	// Through the API: a 400 problem, and nothing reserved or sent.
	w := newWorld()
	resp := call(t, newHandler(w), post(welcome, "k", `{"args":{"userId":"u-1"},"runAt":"2026-12-03T09:00:00Z","delaySeconds":5}`))
	if p := checkProblem(t, resp, http.StatusBadRequest); len(p.Errors) == 0 || p.Errors[0].Field != "runAt" {
		t.Fatalf("problem %+v; want a field error on runAt", p)
	}
	if len(w.jobs) != 0 || len(w.messages()) != 0 || len(w.schedules) != 0 {
		t.Fatalf("a refused request left %d jobs, %d messages, %d schedules", len(w.jobs), len(w.messages()), len(w.schedules))
	}
}

// Where a job waits depends on how far ahead it is due: within a second (or
// in the past) it runs now; up to 900 s ahead SQS delays it; further ahead
// a one-time schedule holds it, and nothing is sent to SQS.
func TestRunAtBoundary(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ahead     time.Duration
		state     jobs.State
		sqsDelay  time.Duration // -1: no SQS message
		scheduled bool
	}{
		{"in the past", -time.Hour, jobs.StateEnqueued, 0, false},
		{"half a second ahead", 500 * time.Millisecond, jobs.StateEnqueued, 0, false},
		{"two seconds ahead", 2 * time.Second, jobs.StateScheduled, 2 * time.Second, false},
		{"900 s ahead", 900 * time.Second, jobs.StateScheduled, 900 * time.Second, false},
		{"901 s ahead", 901 * time.Second, jobs.StateScheduled, -1, true},
		{"two hours ahead", 2 * time.Hour, jobs.StateScheduled, -1, true},
		{"300 days ahead", 300 * 24 * time.Hour, jobs.StateScheduled, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			at := w.Now().Add(tc.ahead)
			b := mustBody(t, call(t, newHandler(w), post(welcome, "k", runAtBody(`"`+at.Format(time.RFC3339Nano)+`"`))), http.StatusAccepted)
			id := message.DeriveMessageID(alice, "k")
			j, _ := w.Get(context.Background(), id)
			if b.State != string(tc.state) || j.State != tc.state {
				t.Fatalf("answer %s, record %s; want %s", b.State, j.State, tc.state)
			}
			wantRunAt := at
			if tc.ahead < time.Second {
				wantRunAt = w.Now()
			}
			if !j.RunAt.Equal(wantRunAt) {
				t.Errorf("record runAt %s, want %s", j.RunAt, wantRunAt)
			}
			msgs := w.messages()
			switch {
			case tc.sqsDelay < 0 && len(msgs) != 0:
				t.Errorf("sent %d SQS messages; want none (a schedule holds the job)", len(msgs))
			case tc.sqsDelay >= 0 && (len(msgs) != 1 || msgs[0].Delay != tc.sqsDelay):
				t.Errorf("messages %+v; want one with delay %s", msgs, tc.sqsDelay)
			}
			s, ok := w.schedule(id)
			if ok != tc.scheduled {
				t.Fatalf("schedule %v; want %v", ok, tc.scheduled)
			}
			if ok && (s.Body != j.Message || !s.RunAt.Equal(at) || s.Queue != contract.QueueDefault) {
				t.Errorf("schedule %+v; want the job's envelope at %s to the default queue", s, at)
			}
		})
	}
}

// A failed schedule creation is a retryable 503 that leaves the job Pending
// (never Scheduled); the retry with the same key makes the schedule of the
// same job id, and a later request for the key dedups onto it.
func TestScheduleFailureLeavesPending(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	body := runAtBody(`"` + w.Now().Add(3*24*time.Hour).Format(time.RFC3339) + `"`)
	id := message.DeriveMessageID(alice, "k")
	w.scheduleErr = errors.New("scheduler down")
	resp := call(t, h, post(welcome, "k", body))
	p := checkProblem(t, resp, http.StatusServiceUnavailable)
	if resp.Headers["Retry-After"] == "" || !strings.Contains(p.Detail, "scheduler") {
		t.Fatalf("503 %+v, headers %v; want Retry-After and the scheduler named", p, resp.Headers)
	}
	if j, err := w.Get(context.Background(), id); err != nil || j.State != jobs.StatePending {
		t.Fatalf("job after a failed schedule: %+v, %v; want Pending", j, err)
	}
	if _, ok := w.schedule(id); ok || len(w.messages()) != 0 {
		t.Fatal("a failed schedule left a schedule or a message")
	}
	w.scheduleErr = nil
	b := mustBody(t, call(t, h, post(welcome, "k", body)), http.StatusAccepted)
	if b.JobID != id || b.State != "Scheduled" {
		t.Fatalf("retry: %+v; want job %s Scheduled", b, id)
	}
	if _, ok := w.schedule(id); !ok {
		t.Fatal("the retry made no schedule")
	}
	dup := mustBody(t, call(t, h, post(welcome, "k-other", runAtBody(`"`+w.Now().Add(time.Hour).Format(time.RFC3339)+`"`))), http.StatusOK)
	if !dup.Deduplicated || dup.JobID != id || dup.State != "Scheduled" {
		t.Fatalf("second request for the key: %+v; want a dedup onto %s", dup, id)
	}
	if len(w.schedules) != 1 || len(w.messages()) != 0 {
		t.Fatalf("%d schedules, %d messages; want the one schedule", len(w.schedules), len(w.messages()))
	}
}

// runAt is part of the request: the same Idempotency-Key with another runAt
// is another request (422), never a replay of the first.
func TestRunAtInFingerprint(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	mustBody(t, call(t, h, post(welcome, "k", runAtBody(`"2026-12-03T09:00:00Z"`))), http.StatusAccepted)
	checkProblem(t, call(t, h, post(welcome, "k", runAtBody(`"2026-12-04T09:00:00Z"`))), http.StatusUnprocessableEntity)
	again := call(t, h, post(welcome, "k", runAtBody(`"2026-12-03T09:00:00Z"`)))
	if again.StatusCode != http.StatusAccepted || again.Headers[enqueue.HeaderReplayed] != "true" {
		t.Fatalf("same request again: %d %v; want the replayed 202", again.StatusCode, again.Headers)
	}
}

// A delayed job is never visible before its runAt: the wait is measured
// after the lock and the reservation (time has passed since the request
// came in), and SQS takes whole seconds, so the delay it is sent with is
// rounded up, never down (delaySeconds 1 measured as 0.9 s goes as 1 s,
// not 0).
func TestDelayNeverRunsEarly(t *testing.T) {
	for _, delay := range []int{1, 2, 7, 900} {
		t.Run(fmt.Sprint(delay), func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			// Every look at the clock costs 30 ms, as the lock, the
			// reservation and the send do.
			h.Now = func() time.Time { w.advance(30 * time.Millisecond); return w.Now() }
			var sentAt time.Time
			w.onSend = func(sqsqueue.Message) { sentAt = w.Now() }
			b := mustBody(t, call(t, h, post(welcome, "k", fmt.Sprintf(`{"args":{"userId":"u-1"},"delaySeconds":%d}`, delay))), http.StatusAccepted)
			j, _ := w.Get(context.Background(), b.JobID)
			msgs := w.messages()
			if len(msgs) != 1 {
				t.Fatalf("%d messages, want 1", len(msgs))
			}
			visible := sentAt.Add(time.Duration(sqsqueue.DelaySeconds(msgs[0].Delay)) * time.Second)
			if visible.Before(j.RunAt) {
				t.Fatalf("sent at %s with DelaySeconds %d: visible at %s, before its runAt %s",
					sentAt.Format(time.StampMilli), sqsqueue.DelaySeconds(msgs[0].Delay), visible.Format(time.StampMilli), j.RunAt.Format(time.StampMilli))
			}
			if late := visible.Sub(j.RunAt); late >= time.Second {
				t.Errorf("visible %v after its runAt; want less than a second", late)
			}
		})
	}
}
