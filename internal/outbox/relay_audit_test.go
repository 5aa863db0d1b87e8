package outbox_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/message"
)

// TestAuditAnItemAfterAParentHeldBackByAnOutageIsNotLost: a producer
// writes a parent's item and its child's item (after the parent) in one
// transaction; they land in different shards of the outbox stream. The
// enqueue API is unavailable for five minutes (503: both shards retry
// their item, each blocked on it). When it is back, the child's shard
// happens to retry first: the parent's job does not exist yet (its item is
// still waiting in the other shard), the API answers 404, and the child's
// item is now older than ParentWait (measured from its write, the outage
// included), so it is dead-lettered, and an outbox dead letter cannot be
// redriven (api.md). A second later the parent's item is relayed and its
// job runs; the child, written in the same transaction, never does. The
// same happens whenever the stream's iterator age exceeds two minutes (a
// backlog, throttled relays).
//
// A fix must guarantee that an item whose parent's item was written (and
// is not yet relayed) is never dead-lettered for the parent's absence, however
// late the relay gets to either of them (e.g. look the parent up in the
// outbox, or measure the wait from the first answer that was not a retry).
//
// The fix is the API's: an outbox caller's continuation may be reserved
// before its parent exists and waits for it (jobs.parentMayFollow), as long
// as the parent's item can still be relayed (proven on moto by
// internal/enqueue's TestIntegrationOutboxChildBeforeItsParent). The fake
// API below answers as the API now does; the relay must then neither retry
// nor dead-letter the child.
func TestAuditAnItemAfterAParentHeldBackByAnOutageIsNotLost(t *testing.T) {
	written := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	now := written
	parent := message.DeriveMessageID("outbox:signup", "k-parent")
	child := message.DeriveMessageID("outbox:signup", "k-child")
	down, parentMade := true, false
	h := newHarness()
	h.relay.Now = func() time.Time { return now }
	h.api.answerOf = func(r enqueue.Request) enqueue.Answer {
		id := message.DeriveMessageID(r.Caller, r.IdempotencyKey)
		switch {
		case down:
			return enqueue.Answer{Status: http.StatusServiceUnavailable, Problem: enqueue.ProblemUnavailable, Detail: "a backing service failed"}
		case id == child && !parentMade:
			return enqueue.Answer{Status: http.StatusAccepted, JobID: id, State: "AwaitingContinuation"}
		case id == parent:
			parentMade = true
		}
		return enqueue.Answer{Status: http.StatusAccepted, JobID: id, State: "Enqueued"}
	}
	parentRec := record("INSERT", image("signup", "k-parent", "u-1"))
	childImg := image("signup", "k-child", "u-2")
	childImg["after"] = s(parent)
	childRec := record("INSERT", childImg)
	for _, r := range []*events.DynamoDBEventRecord{&parentRec, &childRec} {
		r.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: written}
	}
	// The outage: both shards retry their item.
	for now = written.Add(time.Second); now.Before(written.Add(5 * time.Minute)); now = now.Add(time.Minute) {
		if len(h.handle(t, childRec)) != 1 || len(h.handle(t, parentRec)) != 1 {
			t.Fatal("an item was not retried while the API answered 503")
		}
	}
	// The API is back; the child's shard retries first, then the parent's.
	down = false
	failed := h.handle(t, childRec)
	if len(h.handle(t, parentRec)) != 0 || !parentMade {
		t.Fatal("the parent's item was not relayed once the API was back")
	}
	if len(failed) == 1 {
		failed = h.handle(t, childRec) // the child's shard retries it
	}
	if _, lettered := h.letters.recs[outbox.LetterID(child)]; lettered || len(failed) != 0 {
		t.Fatalf("the child's item, written with its parent's in one transaction, was dead-lettered (%t; retried %v) because the "+
			"relay reached it 5 minutes after its write, the parent's item still unrelayed in another shard: the child never runs "+
			"(an outbox dead letter cannot be redriven)", lettered, failed)
	}
}
