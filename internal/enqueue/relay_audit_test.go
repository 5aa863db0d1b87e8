package enqueue_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
)

// TestAuditRelayRetriedAfterACrashIsNotRefusedForTheLocksLife: the relay
// dies mid-item (its Lambda times out after the job's message was sent and
// before its answer was stored: a slow scheduler or SQS call, a batch of
// slow items). Lambda retries the shard's batch at once; a stream's retries
// have no delay of their own, and this template allows 10
// (MaximumRetryAttempts) before the batch goes to OutboxFailureQueue and
// the shard moves on.
//
// Since 8b67470 the relay runs under the request layer, and the dead
// relay's IN_PROGRESS lock holds for idempotency.DefaultLockTimeout (30 s):
// every retry within it is 409 request-in-flight, which the relay reports
// as a transient batch item failure. Ten retries spent inside those 30 s
// drop the item for good: a job the producer committed never exists (its
// record stays Pending, its message may or may not be in the queue).
// Before, a re-relay resumed its own Pending job at once. A shard is
// relayed by one invocation at a time, so the only holder of an
// outbox:<producer> key's lock a retry can meet is a relay that died.
//
// A fix must guarantee that a retry of the relay after a crash is never
// refused for the lock's life: the relay takes over a lock of its own
// caller at once (or waits it out within its invocation), or the event
// source's retries provably outlast the lock.
func TestAuditRelayRetriedAfterACrashIsNotRefusedForTheLocksLife(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	body := `{"args":{"userId":"u-1"}}`
	w.onSend = func(sqsqueue.Message) { panic("the relay's Lambda timed out") }
	func() {
		defer func() { _ = recover() }()
		relay(h, "signup-7", body)
	}()
	w.onSend = nil
	w.advance(time.Second) // the event source's retry, at once
	var answers []int
	for range 11 { // the first retry and the 10 the template allows
		a := relay(h, "signup-7", body)
		answers = append(answers, a.Status)
		if a.Status == http.StatusAccepted {
			return
		}
	}
	t.Fatalf("the relay's retries after its crash answered %v; every one is a transient failure while the dead relay's lock lives (%s): "+
		"the event source's retries are spent and the item goes to the failure queue, its job never made", answers, idempotency.DefaultLockTimeout)
}
