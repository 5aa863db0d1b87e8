//go:build integration

package enqueue_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
)

// racingRelease is the enqueue's jobs table with the chain function's
// release of the same parent running alongside the enqueue's own: the
// chain's release has moved the continuation out of waiting and is sending
// it when the enqueue's release reads it.
type racingRelease struct {
	enqueue.Jobs
	store *jobs.Store
}

func (r racingRelease) ReleaseContinuations(ctx context.Context, parentID string, send jobs.SendFunc) (jobs.ReleaseReport, error) {
	var rep jobs.ReleaseReport
	var err error
	ran := false
	_, cerr := r.store.ReleaseContinuations(ctx, parentID, func(ctx context.Context, j jobs.Job) error {
		if !ran {
			ran = true
			rep, err = r.Jobs.ReleaseContinuations(ctx, parentID, send) // the enqueue's, mid-send of the chain's
		}
		return send(ctx, j)
	})
	if !ran {
		return r.Jobs.ReleaseContinuations(ctx, parentID, send)
	}
	if cerr != nil {
		return rep, cerr
	}
	return rep, err
}

// TestAttackContinuationOfAnEndedParentIsNotAnsweredWaiting: contract.md
// promises that "a parent that has already ended when the continuation is
// enqueued decides at once: the answer is Enqueued (or Cancelled) rather
// than AwaitingContinuation". awaitAndFinish reads the state for its
// answer from its own release's report and re-reads the record only when
// the job is not in rep.Waiting; but ReleaseReport.Waiting also holds a
// continuation "another release is sending" (a Pending one within the
// pending timeout, or one whose moveAwaiting lost to another release: its
// stale read said AwaitingContinuation). A continuation enqueued while its
// parent's end reaches the chain function (the markers stream) is released
// by both; when the chain's wins, the 202 says AwaitingContinuation for a
// job that is already sent and Enqueued, and that answer is stored and
// replayed for a day. decideContinuations (a batch) has the same gap.
//
// A fix must guarantee that the answer never says AwaitingContinuation for
// a continuation whose parent had ended: re-read the record when the job
// is in Waiting while the parent is terminal.
func TestAttackContinuationOfAnEndedParentIsNotAnsweredWaiting(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	parent := succeededRacing(t, s)
	got := mustBody(t, call(t, s.h, post(welcome, "child", `{"args":{"userId":"u-2"},"after":"`+parent+`"}`)), http.StatusAccepted)
	rec, err := s.jobs.Get(ctx, got.JobID)
	if err != nil {
		t.Fatal(err)
	}
	_, envs := s.receive(t, contract.QueueDefault)
	if got.State == string(jobs.StateAwaitingContinuation) {
		t.Fatalf("the continuation of a parent that had already succeeded is answered %s (stored, replayed for a day); "+
			"its record reads %s and %d message(s) were sent: the parent's end was decided at once, by the chain's release",
			got.State, rec.State, len(envs))
	}
}

// TestAttackBatchContinuationOfAnEndedParentIsNotAnsweredWaiting: the
// batch's decideContinuations has the gap of awaitAndFinish: a job its own
// release reports in Waiting because another release (the chain
// function's, for the same parent's end) is sending it keeps
// AwaitingContinuation in the batch's answer (202, replayed for a day, and
// kept in the batch's item), while the job is sent and Enqueued.
func TestAttackBatchContinuationOfAnEndedParentIsNotAnsweredWaiting(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	parent := succeededRacing(t, s)
	b := decodeBatch(t, call(t, s.h, postBatch("chained", `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-2"},"after":"`+parent+`"}]}`)),
		http.StatusAccepted)
	rec, err := s.jobs.Get(ctx, b.Jobs[0].JobID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Jobs[0].State == string(jobs.StateAwaitingContinuation) {
		t.Fatalf("a batch's continuation of a parent that had already succeeded is answered %s; its record reads %s",
			b.Jobs[0].State, rec.State)
	}
}

// succeededRacing enqueues a job and claims its marker (it succeeded), and
// sets s's jobs table to race the chain function's release of its end
// against the enqueue's own; it returns the job's id.
func succeededRacing(t *testing.T, s *stack) string {
	t.Helper()
	parent := mustBody(t, call(t, s.h, post(welcome, "parent", welcomeU1)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	if _, err := s.markers.Claim(context.Background(), jobs.Job{ID: parent.JobID, Type: welcome}.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(s.clock.Now(), s.clock.Now(), engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	s.h.Jobs = racingRelease{Jobs: s.h.Jobs, store: s.jobs}
	return parent.JobID
}

// TestAttackBatchChainKeepsTheParentItAnswers: job 1 of a batch waits for
// "#0". finishBatch resolves "#0" to the job job 0 *is* on this try
// (b.Jobs[0].JobID) and reserves job 1 after it; the resolution is never
// stored in the batch's item until the batch is accepted. A try cut short
// after job 1's reservation (its answer's write fails: 503) leaves job 1
// waiting for the active job X that job 0 deduplicated onto. When X ends
// before the retry (or the finisher) — here the caller cancels it, and the
// chain function releases X's end — job 0's key is free, so the retry
// reserves job 0 as a new job of its own and sends it, while job 1's
// reservation finds its own record (still after X: sameJob compares only the
// fingerprint) and answers it as it stands. The 202 says job 0 is a new
// job and job 1 waits for it ("#0"); job 1 was in fact cancelled because X
// was ("the job it waits for, X, ended Cancelled"), and job 0 runs with
// nothing after it. Had X succeeded instead, job 1 would run at once, before
// the job 0 it waits for.
//
// The fix: the retry answers what the first try decided (job 0 is X, as
// job 1's record says), so job 1 waits for the job the answer names and
// reads Cancelled with it.
//
// A fix must guarantee that a batch's continuation waits for the job its
// batch's answer names for "#k": the resolution of "#k" is kept with the
// batch before its dependents are reserved and reused by every later try,
// or a job whose own record waits for another parent than the one resolved
// now is refused/reconciled rather than answered as it stands.
func TestAttackBatchChainKeepsTheParentItAnswers(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	x := activeJob(t, s)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-1"},"after":"#0"}]}`
	firstTryCutShort(t, s, "flip", body)
	job1 := enqueue.BatchJobID(alice, "flip", 1)
	if got, err := s.jobs.Get(ctx, job1); err != nil || got.After != x.JobID {
		t.Fatalf("after the first try job 1 reads %+v %v; want it waiting for %s (job 0 deduplicated onto it)", got.State, err, x.JobID)
	}
	// Before the retry, X ends: its caller cancels it, and the chain
	// function releases its end.
	if _, err := s.jobs.Cancel(ctx, x.JobID, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := s.jobs.ReleaseContinuations(ctx, x.JobID, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	b := decodeBatch(t, call(t, s.h, postBatch("flip", body)), http.StatusAccepted)
	got, err := s.jobs.Get(ctx, job1)
	if err != nil {
		t.Fatal(err)
	}
	if got.After != b.Jobs[0].JobID {
		t.Fatalf("the batch's answer says job 0 is %s (deduplicated %t, %s) and job 1 (%s) waits for it (\"#0\"), but job 1 waits "+
			"for %s (the job job 0 deduplicated onto on the first try) and reads %s (%q): it never runs after job 0",
			b.Jobs[0].JobID, b.Jobs[0].Deduplicated, b.Jobs[0].State, b.Jobs[1].State, got.After, got.State, got.LastReason)
	}
	if got.State == jobs.StateCancelled && !jobs.State(b.Jobs[0].State).Terminal() {
		t.Fatalf("job 1 reads Cancelled (%q) although job 0 (%s) is active", got.LastReason, b.Jobs[0].State)
	}
	// The retry answers what the first try decided (job 0 is X, which its
	// caller cancelled, so job 1 is cancelled with it); it makes no job
	// beyond its answer.
	if own := enqueue.BatchJobID(alice, "flip", 0); b.Jobs[0].JobID != own {
		if stray, err := s.jobs.Get(ctx, own); err == nil {
			t.Fatalf("the retry made job 0 anew (%s, %s) although its answer says job 0 is %s", own, stray.State, b.Jobs[0].JobID)
		}
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 0 {
		t.Fatalf("the retry sent %d message(s); the first try's decisions stand and nothing is left to send", len(envs))
	}
}

// TestAttack2BatchRetryCompletesWhenTheJobItsFirstTryAnsweredIsGone:
// earlierResolutions makes a retry (or the finisher) answer job 0 as the
// job X its dependents' records wait for, and answerAs reads X with
// h.Jobs.Get. X's record has a TTL (an active job's ActiveRecord, 19 days
// from its runAt; a cancelled one's 14 days); job 1's record, waiting for X,
// has none while it waits (and 14 days more once the sweep cancels it). A
// batch lives as long as its latest job is due (here job 2, 40 days ahead),
// and its accept is finished by whatever try comes next. Once X's record is
// gone, answerAs fails with ErrNotFound, errs[0] fails job 1 ("waits for
// jobs[0], which failed"), and finishBatch fails: every retry of the request
// and every run of the finisher answers 503, the batch stays Accepting for
// good. Besides, preReserve runs before earlierResolutions and X's dedup
// pointer expired with its record: where the transaction names the item
// that failed it (DynamoDB does; moto here names none, so it is not seen
// below), job 0 is reserved anew, a Pending record no answer names.
//
// docs/api.md: "A crash at any point of the accept leaves no job, or a batch
// that completes by itself", and "job k is that job again in every later
// answer (with its state then), even if it has ended since".
func TestAttack2BatchRetryCompletesWhenTheJobItsFirstTryAnsweredIsGone(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	x := activeJob(t, s)
	later := s.clock.Now().Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-1"},"after":"#0"},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-2"},"runAt":"` + later + `"}]}`
	firstTryCutShort(t, s, "gone", body)
	job0, job1 := enqueue.BatchJobID(alice, "gone", 0), enqueue.BatchJobID(alice, "gone", 1)
	if got, err := s.jobs.Get(ctx, job1); err != nil || got.After != x.JobID {
		t.Fatalf("after the first try job 1 reads %+v %v; want it waiting for %s (job 0 deduplicated onto it)", got.State, err, x.JobID)
	}
	// Its finisher failed meanwhile (an outage for its retries). X never
	// runs; 20 days on, its record and its pointer are past their TTL, and
	// the continuation sweep has cancelled job 1 (its parent Expired).
	s.clock.Advance(20 * 24 * time.Hour)
	if _, err := s.jobs.Get(ctx, x.JobID); err == nil {
		t.Fatal("X's record still reads; the test wants it gone")
	}
	if _, err := s.jobs.SweepContinuations(ctx, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	resp := call(t, s.h, postBatch("gone", body))
	fin := s.h.FinishBatch(ctx, enqueue.BatchID(alice, "gone"))
	b, berr := s.jobs.GetBatch(ctx, enqueue.BatchID(alice, "gone"))
	stray, serr := s.jobs.Get(ctx, job0)
	if resp.StatusCode != http.StatusAccepted || fin != nil || berr != nil || b.State != jobs.BatchAccepted {
		t.Fatalf("the retry of a batch whose job 0 the first try answered as %s (its record gone since) answered %d %s; "+
			"its finisher: %v; the batch is %q (%v), never completed; job 0's own id %s: %s %v",
			x.JobID, resp.StatusCode, resp.Body, fin, b.State, berr, job0, stray.State, serr)
	}
	if serr == nil {
		a := decodeBatch(t, resp, http.StatusAccepted)
		if a.Jobs[0].JobID != job0 {
			t.Fatalf("the retry made job 0 anew (%s, %s) although its answer says job 0 is %s", job0, stray.State, a.Jobs[0].JobID)
		}
	}
}

// hookedReserve is the enqueue's jobs table with before run ahead of the
// first Reserve of job id (what another function did meanwhile), and
// fail failing every Reserve of job failID.
type hookedReserve struct {
	enqueue.Jobs
	id     string
	before func()
	failID string
	mu     sync.Mutex // a batch reserves its jobs concurrently
}

func (h *hookedReserve) Reserve(ctx context.Context, job jobs.Job, policy contract.DuplicatePolicy) (jobs.Decision, error) {
	if job.ID == h.failID {
		return jobs.Decision{}, errors.New("DynamoDB unavailable")
	}
	if job.ID == h.id {
		h.mu.Lock()
		b := h.before
		h.before = nil
		h.mu.Unlock()
		if b != nil {
			b()
		}
	}
	return h.Jobs.Reserve(ctx, job, policy)
}

// TestAttack2BatchFinisherAndRetryAnswerOneJobZero: earlierResolutions
// reads the dependents' records once, before any job of the try is
// reserved, and nothing makes the resolution of "#0" one decision shared by
// the tries that run at once (the finisher arrives 60 s after the first
// try; a client's retry at that moment runs alongside it). Here the first
// try deduplicated job 0 onto X and was cut short before job 1's
// reservation (503, nothing waits for X). The finisher reads no earlier
// resolution; before it reserves job 0, the retry runs whole: job 0 is X
// (deduplicated), job 1 is reserved waiting for X, 202 stored and replayed
// for a day. X is cancelled and its end released (job 1 cancelled with it).
// The finisher then reserves job 0 as a new job of its own and sends it,
// finds job 1's record as it stands, and writes the batch's answer over
// the retry's: GET /v1/batches says job 0 is the new job (running) and job
// 1 waits for it, the stored 202 says job 0 is X; job 1 in fact waited for
// X and was cancelled with it, while a job 0 the caller was told is X runs
// with nothing after it. This is the defect earlierResolutions fixed for
// one try after another, with the two tries at once.
//
// Fixed by a hold on the batch (jobs.Store.TakeBatch): the tries of a
// batch decide its jobs one at a time.
func TestAttack2BatchFinisherAndRetryAnswerOneJobZero(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	x := activeJob(t, s)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-1"},"after":"#0"}]}`
	job0, job1 := enqueue.BatchJobID(alice, "race", 0), enqueue.BatchJobID(alice, "race", 1)
	plain := s.h.Jobs
	// The first try: job 0 is X, job 1's reservation fails (503).
	s.h.Jobs = &hookedReserve{Jobs: plain, failID: job1}
	if r := call(t, s.h, postBatch("race", body)); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the first try, job 1's reservation failing: %d %s", r.StatusCode, r.Body)
	}
	s.h.Jobs = plain
	var retry events.APIGatewayV2HTTPResponse
	finisher := *s.h
	finisher.Jobs = &hookedReserve{Jobs: plain, id: job0, before: func() {
		retry = call(t, s.h, postBatch("race", body))
		if _, err := s.jobs.Cancel(ctx, x.JobID, alice); err != nil {
			t.Error(err)
		}
		if _, err := s.jobs.ReleaseContinuations(ctx, x.JobID, s.h.SendFunc()); err != nil {
			t.Error(err)
		}
	}}
	fin := finisher.FinishBatch(ctx, enqueue.BatchID(alice, "race"))
	// The fix: one try at a time holds the batch (TakeBatch): the retry
	// that came while the finisher held it is refused, to come back; once
	// the finisher accepted the batch, the retry is answered from it.
	if retry.StatusCode != http.StatusConflict || retry.Headers["Retry-After"] == "" {
		t.Fatalf("a retry while the finisher holds the batch: %d %v %s; want 409 request-in-flight with Retry-After", retry.StatusCode, retry.Headers, retry.Body)
	}
	if fin != nil {
		t.Fatalf("the finisher: %v", fin)
	}
	retried := decodeBatch(t, call(t, s.h, postBatch("race", body)), http.StatusAccepted)
	got := decodeBatch(t, call(t, s.h, request(http.MethodGet, "/v1/batches/"+enqueue.BatchID(alice, "race"), "")), http.StatusOK)
	rec1, err := s.jobs.Get(ctx, job1)
	if err != nil {
		t.Fatal(err)
	}
	own, oerr := s.jobs.Get(ctx, job0)
	_, envs := s.receive(t, contract.QueueDefault)
	if got.Jobs[0].JobID != retried.Jobs[0].JobID || rec1.After != got.Jobs[0].JobID {
		t.Fatalf("the retry's stored 202 says job 0 is %s (%s); the batch (its finisher: %v) says job 0 is %s (%s) and job 1 (%s) "+
			"waits for it; job 1 waits for %s and reads %s (%q); job 0's own job %s reads %s %v, %d message(s) sent",
			retried.Jobs[0].JobID, retried.Jobs[0].State, fin, got.Jobs[0].JobID, got.Jobs[0].State, got.Jobs[1].State,
			rec1.After, rec1.State, rec1.LastReason, job0, own.State, oerr, len(envs))
	}
}

// TestAttack2BatchRetryAnswersAJobAsItsTwinIs: jobs 0 and 1 of a batch
// hold one key, so one of them is the other, deduplicated (finishJob:
// "another job of this very batch holds the key ... promoted with the
// batch's answer"); job 2 waits for "#0" and job 3 for "#1", so both wait
// for the one that was made. On the first try the answer says the
// deduplicated one is its twin with the twin's queued state. A retry (the
// first try cut short at its answer) now takes the deduplicated one through
// earlierResolutions: answerAs reads its twin's record with Get, before
// the retry's own promotion of the twin is written (it rides with the
// answer), and answers the record's Pending: the stored 202, replayed for a
// day, says one job is Enqueued at index 0 and Pending at index 1.
func TestAttack2BatchRetryAnswersAJobAsItsTwinIs(t *testing.T) {
	s := newStack(t)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-2"},"after":"#0"},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-3"},"after":"#1"}]}`
	firstTryCutShort(t, s, "twin", body)
	b := decodeBatch(t, call(t, s.h, postBatch("twin", body)), http.StatusAccepted)
	if b.Jobs[1].JobID != b.Jobs[0].JobID || b.Jobs[1].State != b.Jobs[0].State {
		t.Fatalf("the retry's answer (stored, replayed for a day) says job 0 is %s %s (deduplicated %t) and job 1 is %s %s (deduplicated %t): "+
			"one job, two states", b.Jobs[0].JobID, b.Jobs[0].State, b.Jobs[0].Deduplicated, b.Jobs[1].JobID, b.Jobs[1].State, b.Jobs[1].Deduplicated)
	}
}

// asWrittenBeforeTheHold removes the hold's attributes from batch
// batchID's item: the item as a release without TakeBatch wrote it (its
// accept, or its finisher's AcceptBatch, wrote no takenBy).
func asWrittenBeforeTheHold(t *testing.T, s *stack, batchID string) {
	t.Helper()
	_, err := s.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.jobsTable),
		Key:              map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.BatchPK(batchID)}},
		UpdateExpression: aws.String("REMOVE takenBy, takenUntil"),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAttack3RetryOfABatchAcceptedBeforeTheHoldIsAnswered: a batch
// accepted by its finisher before this release (AcceptBatch wrote no
// takenBy; the request's own answer was never stored, its first try cut
// short) is answered by the request's retry "from the batch" (FinishBatch:
// "a retry of that request finds the batch accepted and answers from it").
// The retry's PutBatch finds it Accepted with TakenBy "" and skips
// TakeBatch; its completion commits BatchAccepted, now conditional on
// takenBy = "" , which an item with no takenBy fails: ErrCompanionFailed,
// the fallback commits the same condition again, and the retry answers 503.
// Every retry does the same until the batch's answer lifetime ends: the
// client, told to "retry with the same Idempotency-Key", never gets its
// answer although every job of its batch exists.
func TestAttack3RetryOfABatchAcceptedBeforeTheHoldIsAnswered(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}}]}`
	id := enqueue.BatchID(alice, "legacy")
	firstTryCutShort(t, s, "legacy", body)
	// Before the release: the item had no hold, and the finisher of that
	// release accepted it without one.
	asWrittenBeforeTheHold(t, s, id)
	if err := s.h.FinishBatch(ctx, id); err != nil {
		t.Fatal(err)
	}
	asWrittenBeforeTheHold(t, s, id)
	if b, err := s.jobs.GetBatch(ctx, id); err != nil || b.State != jobs.BatchAccepted {
		t.Fatalf("the batch reads %q %v; want it accepted", b.State, err)
	}
	var codes []int
	for range 3 {
		r := call(t, s.h, postBatch("legacy", body))
		codes = append(codes, r.StatusCode)
		if r.StatusCode == http.StatusAccepted {
			return
		}
	}
	t.Fatalf("every retry of a batch its finisher accepted before the hold (no takenBy) answers %v, never its 202: "+
		"the completion's BatchAccepted is conditional on takenBy = \"\"", codes)
}

// TestAttack3RetryKeepsJobOneAsItsTwin: jobs 0 and 1 of a batch hold one
// key, so on the first try job 1 is job 0, deduplicated (finishJob: "another
// job of this very batch holds the key"), and job 2 ("after":"#1") is
// reserved waiting for job 0. The first try is cut short at its answer
// (503). Job 0 ends (its caller cancels it; its end is released, job 2
// cancelled with it). The retry's earlierResolutions finds "#1" resolved to
// job 0, and finishBatch drops that resolution because job 0 is "another of
// the batch's (a twin of its key): deciding it again gives the same
// answer". It does not: job 0 has ended, the default policy
// (AllowAfterFailed) allows a new job under the key, and job 1 is reserved
// anew under its own id and sent: a second job for the key the first try
// answered as one, and the stored answer (replayed for a day) says job 1 is
// that new job and job 2 waits for it, while job 2 waited for job 0 and was
// cancelled with it. Exactly what earlierResolutions was written to prevent
// (TestAttackBatchChainKeepsTheParentItAnswers), reopened for a twin.
func TestAttack3RetryKeepsJobOneAsItsTwin(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-2"},"after":"#1"}]}`
	job0, job1, job2 := enqueue.BatchJobID(alice, "twin3", 0), enqueue.BatchJobID(alice, "twin3", 1), enqueue.BatchJobID(alice, "twin3", 2)
	// On the first try job 0 takes the key, job 1 is it (job 1's
	// reservation comes after job 0's record exists).
	plain := s.h.Jobs
	s.h.Jobs = &hookedReserve{Jobs: plain, id: job1, before: func() {
		for range 100 {
			if _, err := s.jobs.Get(ctx, job0); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}}
	firstTryCutShort(t, s, "twin3", body)
	s.h.Jobs = plain
	if got, err := s.jobs.Get(ctx, job2); err != nil || got.After != job0 {
		t.Fatalf("after the first try job 2 reads %+v after %s %v; want it waiting for job 0 %s (job 1 is job 0; job 1 %s)", got.State, got.After, err, job0, job1)
	}
	s.receive(t, contract.QueueDefault) // job 0's message, the first try's
	if _, err := s.jobs.Cancel(ctx, job0, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := s.jobs.ReleaseContinuations(ctx, job0, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	b := decodeBatch(t, call(t, s.h, postBatch("twin3", body)), http.StatusAccepted)
	rec2, err := s.jobs.Get(ctx, job2)
	if err != nil {
		t.Fatal(err)
	}
	stray, serr := s.jobs.Get(ctx, job1)
	_, envs := s.receive(t, contract.QueueDefault)
	if b.Jobs[1].JobID != job0 || serr == nil || len(envs) != 0 {
		t.Fatalf("the retry's answer (stored, replayed for a day) says job 1 is %s (%s, deduplicated %t) and job 2 (%s) waits for it; "+
			"the first try answered job 1 as job 0 %s, and job 2 waits for %s and reads %s; job 1's own id %s reads %s %v; "+
			"the retry sent %d message(s)", b.Jobs[1].JobID, b.Jobs[1].State, b.Jobs[1].Deduplicated, b.Jobs[2].State,
			job0, rec2.After, rec2.State, job1, stray.State, serr, len(envs))
	}
}
