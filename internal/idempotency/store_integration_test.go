//go:build integration

package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

func newStore(t *testing.T) (*idempotency.Store, *enginetest.Clock, *testenv.CallCounter, *dynamodb.Client) {
	t.Helper()
	counter := testenv.NewCallCounter()
	client := testenv.DynamoDB(t, counter.Option)
	table := testenv.NewTable(t, client, "idem", idempotency.AttrPK, "")
	c := enginetest.NewClock(time.Now().UTC())
	s := idempotency.NewStore(client, table)
	s.Now = c.Now
	counter.Reset()
	return s, c, counter, client
}

func TestBeginCompleteReplay(t *testing.T) {
	s, c, counter, _ := newStore(t)
	ctx := context.Background()
	r, err := s.Begin(ctx, "caller-a", "k1", "fp1")
	if err != nil || r.Outcome != idempotency.Acquired {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	t.Logf("AWS calls for a new Begin: %s", counter)
	if in, err := s.Begin(ctx, "caller-a", "k1", "fp1"); err != nil || in.Outcome != idempotency.InFlight || in.RetryAfter <= 0 {
		t.Fatalf("second Begin = %+v, %v; want in flight", in, err)
	}
	if mm, _ := s.Begin(ctx, "caller-a", "k1", "fp2"); mm.Outcome != idempotency.Mismatch {
		t.Fatalf("other fingerprint = %v; want mismatch", mm.Outcome)
	}
	if other, _ := s.Begin(ctx, "caller-b", "k1", "fp2"); other.Outcome != idempotency.Acquired {
		t.Fatalf("other caller = %v; want acquired (keys are per caller)", other.Outcome)
	}
	resp := idempotency.Response{Status: 202, Headers: map[string]string{"Location": "/v1/jobs/x"}, Body: `{"jobId":"x"}`}
	if err := s.Complete(ctx, r.Lock, resp); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	rp, err := s.Begin(ctx, "caller-a", "k1", "fp1")
	if err != nil || rp.Outcome != idempotency.Replay || rp.Response.Status != 202 || rp.Response.Body != resp.Body || rp.Response.Headers["Location"] != "/v1/jobs/x" {
		t.Fatalf("replay = %+v, %v", rp, err)
	}
	t.Logf("AWS calls for a replay: %s", counter)
	// The lock's conditional put fails and returns the stored record.
	if counter.Get("DynamoDB.PutItem") != 1 || counter.Sum("DynamoDB.GetItem", "DynamoDB.DeleteItem", "DynamoDB.UpdateItem", "DynamoDB.TransactWriteItems") != 0 {
		t.Fatalf("replay calls: %s; want 1 call, the failed conditional put", counter)
	}
	// The record expires after 24 h: the key is new again.
	c.Advance(idempotency.DefaultRetention + time.Second)
	if r, _ := s.Begin(ctx, "caller-a", "k1", "fp2"); r.Outcome != idempotency.Acquired {
		t.Fatalf("after 24h = %v; want acquired", r.Outcome)
	}
}

func TestCrashedLockIsTakenOver(t *testing.T) {
	s, c, _, _ := newStore(t)
	ctx := context.Background()
	first, _ := s.Begin(ctx, "caller-a", "k", "fp")
	c.Advance(idempotency.DefaultLockTimeout + time.Millisecond)
	if mm, _ := s.Begin(ctx, "caller-a", "k", "other"); mm.Outcome != idempotency.Mismatch {
		t.Fatalf("other fingerprint after lock expiry = %v; want mismatch", mm.Outcome)
	}
	second, err := s.Begin(ctx, "caller-a", "k", "fp")
	if err != nil || second.Outcome != idempotency.Acquired || second.Lock.Owner == first.Lock.Owner {
		t.Fatalf("takeover = %+v, %v", second, err)
	}
	// The first owner can neither complete nor release any more.
	if err := s.Complete(ctx, first.Lock, idempotency.Response{Status: 202}); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("stale Complete = %v; want ErrLockLost", err)
	}
	if err := s.Release(ctx, first.Lock); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Begin(ctx, "caller-a", "k", "fp"); in.Outcome != idempotency.InFlight {
		t.Fatalf("stale release freed the new lock: %v", in.Outcome)
	}
	if err := s.Complete(ctx, second.Lock, idempotency.Response{Status: 200, Body: "{}"}); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseKeepsKeyUsable(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	r, _ := s.Begin(ctx, "caller-a", "k", "fp")
	if err := s.Release(ctx, r.Lock); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Begin(ctx, "caller-a", "k", "fp-other"); again.Outcome != idempotency.Acquired {
		t.Fatalf("after release = %v; want acquired", again.Outcome)
	}
}

func TestCompleteWithCompanion(t *testing.T) {
	s, _, counter, client := newStore(t)
	ctx := context.Background()
	table := testenv.NewTable(t, client, "jobs", jobs.AttrPK, "")
	js := jobs.NewStore(client, table, nil)
	now := time.Now()
	job := jobs.Job{ID: "j-1", Caller: "caller-a", Type: "email.welcome.v1", Key: "welcome:u-1", Queue: "default", CorrelationID: "c", Message: "{}", CreatedAt: now, RunAt: now}

	// A companion that fails (the job record does not exist) writes nothing.
	r, _ := s.Begin(ctx, "caller-a", "k", "fp")
	promote := js.Promotion(job)
	if err := s.Complete(ctx, r.Lock, idempotency.Response{Status: 202}, promote); !errors.Is(err, idempotency.ErrCompanionFailed) {
		t.Fatalf("Complete with failing companion = %v; want ErrCompanionFailed", err)
	}
	if in, _ := s.Begin(ctx, "caller-a", "k", "fp"); in.Outcome != idempotency.InFlight {
		t.Fatalf("after failed transaction = %v; want still in flight", in.Outcome)
	}
	if d, err := js.Reserve(ctx, job, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve = %+v, %v", d, err)
	}
	counter.Reset()
	if err := s.Complete(ctx, r.Lock, idempotency.Response{Status: 202, Body: "{}"}, promote); err != nil {
		t.Fatal(err)
	}
	if n := counter.Get("DynamoDB.TransactWriteItems"); n != 1 || counter.String() != "DynamoDB.TransactWriteItems=1" {
		t.Fatalf("calls: %s; want one TransactWriteItems", counter)
	}
	if got, _ := js.Get(ctx, job.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("job after completion: %s", got.State)
	}
}

func TestConcurrentBeginOneWinner(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	const n = 20
	var wg sync.WaitGroup
	results := make([]idempotency.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = s.Begin(ctx, "caller-a", "same", "fp") })
	}
	wg.Wait()
	acquired := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Outcome == idempotency.Acquired {
			acquired++
		}
	}
	if acquired != 1 {
		t.Fatalf("%d acquired; want 1", acquired)
	}
}

// A write whose response was lost and that the SDK retried meets the item
// its first try wrote: the lock is this request's own (never "in flight"
// behind itself), and a completion committed with its companion is done.
func TestRetriedWritesFindTheirOwnItem(t *testing.T) {
	moto := testenv.Moto(t)
	lost := testenv.NewLostResponses("DynamoDB.PutItem", "DynamoDB.TransactWriteItems")
	client := dynamodb.NewFromConfig(moto.ConfigWithRetries(lost.Option))
	idem := testenv.NewTable(t, client, "idem", idempotency.AttrPK, "")
	jobsTable := testenv.NewTable(t, client, "jobs", jobs.AttrPK, "")
	s := idempotency.NewStore(client, idem)
	js := jobs.NewStore(client, jobsTable, nil)
	ctx := context.Background()

	r, err := s.Begin(ctx, "caller-a", "k", "fp")
	if err != nil || r.Outcome != idempotency.Acquired || lost.Lost() != 1 {
		t.Fatalf("Begin with its response lost = %+v, %v (lost %d); want Acquired", r.Outcome, err, lost.Lost())
	}
	now := time.Now()
	job := jobs.Job{ID: message.NewMessageID(), Caller: "caller-a", Type: "email.welcome.v1", Key: "welcome:u-1", Queue: "default", Message: "{}", CreatedAt: now, RunAt: now}
	d, err := js.Reserve(ctx, job, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved || lost.Lost() != 2 {
		t.Fatalf("Reserve with its response lost = %+v, %v; want Reserved (its own write), not a resume", d.Outcome, err)
	}
	lost2 := testenv.NewLostResponses("DynamoDB.TransactWriteItems")
	s2 := idempotency.NewStore(dynamodb.NewFromConfig(moto.ConfigWithRetries(lost2.Option)), idem)
	if err := s2.Complete(ctx, r.Lock, idempotency.Response{Status: 202}, js.Promotion(job)); err != nil || lost2.Lost() != 1 {
		t.Fatalf("Complete with its response lost = %v; want nil", err)
	}
	if rp, _ := s.Begin(ctx, "caller-a", "k", "fp"); rp.Outcome != idempotency.Replay {
		t.Fatalf("after the completion = %v; want a replay", rp.Outcome)
	}
	if got, _ := js.Get(ctx, job.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("job after the completion = %s; want Enqueued", got.State)
	}
}

// TakeOver takes a dead request's lock at once, not after its lockedUntil
// (the outbox relay, whose requests for one key never run at once); the
// dead holder can then neither complete nor release it; a completed record
// still replays and another fingerprint is still a mismatch.
func TestTakeOverTakesALockAtOnce(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	dead, _ := s.Begin(ctx, "outbox:p", "k", "fp")
	if in, _ := s.Begin(ctx, "outbox:p", "k", "fp"); in.Outcome != idempotency.InFlight {
		t.Fatalf("Begin behind a live lock = %v; want in flight", in.Outcome)
	}
	if mm, _ := s.TakeOver(ctx, "outbox:p", "k", "other"); mm.Outcome != idempotency.Mismatch {
		t.Fatalf("TakeOver with another fingerprint = %v; want mismatch", mm.Outcome)
	}
	got, err := s.TakeOver(ctx, "outbox:p", "k", "fp")
	if err != nil || got.Outcome != idempotency.Acquired || got.Lock.Owner == dead.Lock.Owner {
		t.Fatalf("TakeOver = %+v, %v; want the lock at once", got, err)
	}
	if err := s.Complete(ctx, dead.Lock, idempotency.Response{Status: 202}); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("the dead holder's Complete = %v; want ErrLockLost", err)
	}
	if err := s.Complete(ctx, got.Lock, idempotency.Response{Status: 202, Body: "{}"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.TakeOver(ctx, "outbox:p", "k", "fp"); r.Outcome != idempotency.Replay || r.Response.Status != 202 {
		t.Fatalf("TakeOver of a completed request = %+v; want its replay", r)
	}
}
