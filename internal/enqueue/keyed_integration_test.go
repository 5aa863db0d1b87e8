//go:build integration

package enqueue_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
)

// stallingQueue runs stall once, after the first send, before the request
// that sent can keep its answer.
type stallingQueue struct {
	enqueue.Queue
	stalled atomic.Bool
	stall   func()
}

func (q *stallingQueue) Send(ctx context.Context, m sqsqueue.Message) error {
	err := q.Queue.Send(ctx, m)
	if q.stalled.CompareAndSwap(false, true) {
		q.stall()
	}
	return err
}

// A request that stalls past its lease, between its send and its answer,
// is taken over by its retry (the middleware's lease, idempotency.Keys on
// DynamoDB); its own answer, conditional on the lease it no longer holds,
// never overwrites the retry's: the replay is the retry's answer, with the
// job promoted once.
func TestIntegrationAStaleRequestNeverOverwritesTheAnswer(t *testing.T) {
	s := newStack(t)
	first := post(welcome, "stalled", welcomeU1, withHeader("X-Correlation-Id", "corr-first"))
	retry := post(welcome, "stalled", welcomeU1, withHeader("X-Correlation-Id", "corr-retry"))
	var retried events.APIGatewayV2HTTPResponse
	s.h.Queue = &stallingQueue{Queue: s.queue, stall: func() {
		s.clock.Advance(idempotency.DefaultLockTimeout + 1)
		retried = call(t, s.h, retry)
	}}
	stale := call(t, s.h, first)
	if b := mustBody(t, retried, http.StatusAccepted); b.CorrelationID != "corr-first" {
		// The job's correlation id is the first request's: it made the job.
		t.Fatalf("the retry's answer %+v", b)
	}
	if stale.StatusCode != http.StatusAccepted || stale.Headers["X-Correlation-Id"] != "corr-first" {
		t.Fatalf("the stale request's own answer: %d %v %s", stale.StatusCode, stale.Headers, stale.Body)
	}
	replay := call(t, s.h, post(welcome, "stalled", welcomeU1))
	if replay.Headers["Idempotent-Replayed"] != "true" || replay.Headers["X-Correlation-Id"] != "corr-retry" || replay.Body != retried.Body {
		t.Fatalf("replay %v %s; want the retry's answer (X-Correlation-Id corr-retry) %s", replay.Headers, replay.Body, retried.Body)
	}
	b := decodeAccepted(t, replay)
	if j, err := s.jobs.Get(context.Background(), b.JobID); err != nil || j.State != jobs.StateEnqueued {
		t.Fatalf("job %+v, %v", j, err)
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 2 {
		t.Fatalf("%d messages; want the job's message sent by both requests (the marker absorbs the second)", len(envs))
	}
}
