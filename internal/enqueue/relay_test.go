package enqueue_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

// relay is an outbox item of producer p relayed as the relay does.
func relay(h *enqueue.Handler, key, body string) enqueue.Answer {
	return h.EnqueueFor(context.Background(), enqueue.Request{Caller: "outbox:p", Type: welcome, IdempotencyKey: key, Body: []byte(body)})
}

// An outbox item whose first relay deduplicated onto another active job
// with the same natural key is still that one answer when it is relayed
// again after that job ended (a relay crash, a bisect, a producer's
// retried transaction): the relay's decision is stored, and no second job
// (no second mail) is made.
func TestItemRelayedAgainAfterItsDedupJobEndedIsOneJob(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	body := `{"args":{"userId":"u-1"},"key":"welcome:u-1"}`
	first := relay(h, "signup-1", body)
	if first.Status != http.StatusAccepted {
		t.Fatalf("first item: %+v", first)
	}
	second := relay(h, "signup-2", body) // another item, the same natural key
	if second.Status != http.StatusOK || second.JobID != first.JobID {
		t.Fatalf("second item: %+v; want 200 onto %s", second, first.JobID)
	}
	w.setState(first.JobID, jobs.StateSucceeded)
	again := relay(h, "signup-2", body)
	if again != second {
		t.Fatalf("the second item relayed again answered %+v; want its first answer %+v", again, second)
	}
	if n := len(w.messages()); n != 1 {
		t.Fatalf("%d messages sent; want 1 (one job)", n)
	}
	if own := message.DeriveMessageID("outbox:p", "signup-2"); w.jobs[own].ID != "" {
		t.Fatalf("the item relayed again made a job of its own: %+v", w.jobs[own])
	}
	r, ok := w.storedAnswer("outbox:p", "signup-2")
	if !ok || r.KeepUntil.Before(w.Now().Add(lifetime.RelayDecision)) {
		t.Fatalf("the relay's decision is kept until %s (%v); want at least %s: as long as the item can be relayed again", r.KeepUntil, ok, lifetime.RelayDecision)
	}
}

// The same outbox item rewritten with another runAt is refused (422, which
// the relay dead-letters with its reason), never accepted with the old time.
func TestItemRewrittenWithAnotherRunAtIsRefused(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	at := func(d time.Duration) string { return w.Now().Add(d).Format(time.RFC3339) }
	if a := relay(h, "remind", `{"args":{"userId":"u-1"},"runAt":"`+at(2*time.Hour)+`"}`); a.Status != http.StatusAccepted {
		t.Fatalf("first relay: %+v", a)
	}
	a := relay(h, "remind", `{"args":{"userId":"u-1"},"runAt":"`+at(5*time.Hour)+`"}`)
	if a.Status != http.StatusUnprocessableEntity || a.Problem != enqueue.ProblemKeyMismatch {
		t.Fatalf("rewrite with another runAt: %+v; want 422 %s", a, enqueue.ProblemKeyMismatch)
	}
}

// An item that can be relayed again later than the relay's floor (written
// with a longer TTL) keeps its decision until then: a MODIFY of it on the
// fourth day is still the same job.
func TestRelayDecisionOutlivesItsItem(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	until := w.Now().Add(5 * 24 * time.Hour)
	a := h.EnqueueFor(context.Background(), enqueue.Request{Caller: "outbox:p", Type: "email.welcome.v1", IdempotencyKey: "long-lived",
		Body: []byte(`{"args":{"userId":"u-1"}}`), RelayableUntil: until})
	if a.Status != http.StatusAccepted {
		t.Fatalf("%+v", a)
	}
	r, ok := w.storedAnswer("outbox:p", "long-lived")
	if !ok || r.KeepUntil.Before(until) {
		t.Fatalf("the decision is kept until %s (%v); want at least %s, when its item can last be relayed", r.KeepUntil, ok, until)
	}
}
