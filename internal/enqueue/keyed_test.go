package enqueue_test

import (
	"net/http"
	"testing"

	"github.com/runstwice/runstwice/message"
)

// A 409 the API does not keep (another request is creating a job with the
// same natural key) leaves the request's Idempotency-Key free at once: the
// same request, retried as soon as that job exists, is answered with it,
// never refused as in flight behind its own lock.
func TestARefusalThatMayPassLeavesTheKeyFree(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	w.sendErr = errQueueDown
	checkProblem(t, call(t, h, post(welcome, "k-a", welcomeU1)), http.StatusServiceUnavailable)
	w.sendErr = nil
	busy := call(t, h, post(welcome, "k-b", welcomeU1))
	if p := checkProblem(t, busy, http.StatusConflict); busy.Headers["Retry-After"] != "1" || busy.Headers["Idempotent-Replayed"] != "" {
		t.Fatalf("busy: %+v %v; want request-in-flight with Retry-After: 1", p, busy.Headers)
	}
	a := mustBody(t, call(t, h, post(welcome, "k-a", welcomeU1)), http.StatusAccepted) // k-a's retry sends its job
	b := mustBody(t, call(t, h, post(welcome, "k-b", welcomeU1)), http.StatusOK)
	if a.JobID != message.DeriveMessageID(alice, "k-a") || b.JobID != a.JobID || !b.Deduplicated {
		t.Fatalf("k-b's retry %+v; want dedup of k-a's job %s", b, a.JobID)
	}
	if _, kept := w.storedAnswer(alice, "k-b"); !kept {
		t.Fatal("the dedup answer is not kept")
	}
}
