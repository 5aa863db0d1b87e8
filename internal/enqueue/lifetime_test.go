package enqueue_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// A DELETE that lands between the reservation of a job due in more than
// 15 minutes and its CreateSchedule finds no schedule to delete; the
// enqueue then makes the schedule, finds its job cancelled, and deletes the
// schedule itself: no schedule outlives its cancelled job.
func TestCancelRacingAScheduledEnqueueLeavesNoSchedule(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	id := message.DeriveMessageID(alice, "later")
	w.onCreate = func(schedule.Job) {
		if _, err := w.Cancel(context.Background(), id, alice); err != nil {
			t.Errorf("cancel: %v", err)
		}
	}
	at := w.Now().Add(40 * 24 * time.Hour).Format(time.RFC3339)
	resp := call(t, h, post(welcome, "later", `{"args":{"userId":"u-1"},"runAt":"`+at+`"}`))
	b := mustBody(t, resp, http.StatusAccepted)
	if b.JobID != id || b.State != string(jobs.StateCancelled) {
		t.Fatalf("answer %+v; want job %s Cancelled", b, id)
	}
	if s, ok := w.schedule(id); ok {
		t.Fatalf("the cancelled job's schedule %+v is left behind", s)
	}
}

// A job that waits in a one-time schedule says when it is due in every copy
// of its message (the schedule's input), so the markers a worker writes
// outlive the schedule's firing even when it ran earlier; a job SQS delays
// carries no runAt.
func TestScheduledEnvelopeCarriesItsRunAt(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	at := w.Now().Add(200 * 24 * time.Hour)
	b := mustBody(t, call(t, h, post(welcome, "far", `{"args":{"userId":"u-1"},"runAt":"`+at.Format(time.RFC3339)+`"}`)), http.StatusAccepted)
	s, ok := w.schedule(b.JobID)
	if !ok {
		t.Fatal("no schedule")
	}
	env, err := message.Decode([]byte(s.Body))
	if err != nil || !env.RunAt.Equal(at) {
		t.Fatalf("schedule input %s (%v); want runAt %s", s.Body, err, at)
	}
	near := mustBody(t, call(t, h, post(welcome, "near", `{"args":{"userId":"u-2"},"delaySeconds":60}`)), http.StatusAccepted)
	for _, m := range w.messages() {
		if env, err := message.Decode([]byte(m.Body)); err != nil || !env.RunAt.IsZero() {
			t.Fatalf("job %s delayed by SQS: envelope %s (%v); want no runAt", near.JobID, m.Body, err)
		}
	}
}

// The stored answer of a request lives at least a day, and for a job due
// later at least until that job's last delivery: a retry a year on still
// replays, never makes a second job.
func TestStoredAnswerOutlivesItsJob(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	for _, tc := range []struct {
		name, key, body string
		due             time.Time
	}{
		{"now", "now", `{"args":{"userId":"u-1"}}`, time.Time{}},
		{"in 300 days", "year", `{"args":{"userId":"u-2"},"runAt":"` + w.Now().Add(300*24*time.Hour).Format(time.RFC3339) + `"}`, w.Now().Add(300 * 24 * time.Hour)},
	} {
		mustBody(t, call(t, h, post(welcome, tc.key, tc.body)), http.StatusAccepted)
		r, ok := w.storedAnswer(alice, tc.key)
		if !ok {
			t.Fatalf("%s: no stored answer", tc.name)
		}
		want := lifetime.Until(w.Now(), tc.due, lifetime.StoredAnswer)
		if r.KeepUntil.Before(want) || (!tc.due.IsZero() && r.KeepUntil.Before(lifetime.LastDelivery(tc.due))) {
			t.Fatalf("%s: the answer is kept until %s; want at least %s", tc.name, r.KeepUntil, want)
		}
		if tc.due.IsZero() && r.KeepUntil.After(want) {
			t.Fatalf("%s: the answer of a job due now is kept until %s; want its day, %s (its record answers later retries)", tc.name, r.KeepUntil, want)
		}
	}
}

// The same Idempotency-Key with another runAt is 422 once its stored
// answer is gone, as it is within the day: the job's record keeps the
// request's fingerprint, so the old job is never answered for a new
// request.
func TestReusedKeyWithAnotherRunAtIsRefusedAfterItsAnswerExpired(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	at := func(d time.Duration) string { return w.Now().Add(d).Format(time.RFC3339) }
	first := `{"args":{"userId":"u-1"},"runAt":"` + at(30*24*time.Hour) + `"}`
	b := mustBody(t, call(t, h, post(welcome, "k", first)), http.StatusAccepted)
	w.forget(alice, "k")
	other := `{"args":{"userId":"u-1"},"runAt":"` + at(60*24*time.Hour) + `"}`
	checkProblem(t, call(t, h, post(welcome, "k", other)), http.StatusUnprocessableEntity)
	// The same request again still finds its job.
	w.forget(alice, "k")
	if again := mustBody(t, call(t, h, post(welcome, "k", first)), http.StatusAccepted); again.JobID != b.JobID {
		t.Fatalf("the same request again answered job %s; want %s", again.JobID, b.JobID)
	}
}
