package runner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

func key(env message.Envelope) engine.Key {
	return engine.Key{Type: env.Type, JobID: env.MessageID}
}

// Seed invariant 1: an already-processed message does not send, claim or
// even load.
func TestAlreadyProcessedDoesNothing(t *testing.T) {
	h, _ := newHarness(t, nil)
	env := notifyJob()
	if _, err := h.Markers.Store.Claim(context.Background(), key(env), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	if failed := h.Run(t, testkit.Record(t, env, 2)); len(failed) != 0 {
		t.Fatalf("failures %v; want none", failed)
	}
	if got := h.Trace.String(); got != "peek" {
		t.Errorf("already-processed message did more than peek; trace: %s", got)
	}
	if h.Count(notify.Name, engine.JobsDuplicate) != 1 {
		t.Errorf("want a JobsDuplicate metric; got %s", h.Metrics)
	}
}

// Seed invariant 2: the happy path sends, then claims, in that order.
func TestHappyPathSendsThenClaims(t *testing.T) {
	h, e := newHarness(t, nil)
	env := notifyJob()
	if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v; want none", failed)
	}
	if got, want := h.Trace.String(), "peek lease load send claim"; got != want {
		t.Fatalf("trace %q; want %q", got, want)
	}
	if rec, ok := h.MarkerOf(env); !ok || !rec.Processed() {
		t.Fatalf("marker after success = %+v; want claimed", rec)
	}
	// The redelivery of the same message is absorbed.
	if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 || e.sends(env.MessageID) != 1 {
		t.Fatalf("redelivery: failures %v, sends %d; want none and 1", failed, e.sends(env.MessageID))
	}
}

// Seed invariant 3: a failed send propagates and never claims.
func TestFailedSendNeverClaims(t *testing.T) {
	h, e := newHarness(t, nil)
	e.fail(errors.New("SES throttled"))
	msg := testkit.Record(t, notifyJob(), 1)
	if failed := h.Run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want [%s]", failed, msg.MessageId)
	}
	if h.Trace.Has("claim") {
		t.Fatalf("claimed after a failed send; trace: %s", h.Trace)
	}
	if !h.Trace.Has("release") {
		t.Fatalf("lease not released after a failed send, the retry would wait for it; trace: %s", h.Trace)
	}
	if h.Trace.Has("mark-failed") {
		t.Fatal("job marked Failed before its final attempt")
	}
}

// On the final attempt the job is marked Failed, with the real receive
// count, before the error is returned and the queue dead-letters it.
func TestFinalAttemptMarksFailedWithRealAttempts(t *testing.T) {
	h, e := newHarness(t, nil)
	e.fail(errors.New("SES down"))
	env := notifyJob()
	if failed := h.Run(t, testkit.Record(t, env, 5)); len(failed) != 1 {
		t.Fatalf("failures %v; want the record", failed)
	}
	f, ok := h.Jobs.Failure(env.MessageID)
	if !ok || f.Attempts != 5 || f.Class != "transient" || !strings.Contains(f.Reason, "final attempt (5)") {
		t.Fatalf("final attempt marked %+v, %v; want Failed with 5 attempts", f, ok)
	}
	if h.Count(notify.Name, engine.JobsFailed) != 1 || h.Outcomes()[env.MessageID] != "failed" {
		t.Errorf("want JobsFailed and outcome failed; got %s / %v", h.Metrics, h.Outcomes())
	}
}

func TestDeadlineIsRetryNotFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
		err  error
	}{
		{"context already cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, nil},
		{"handler hits the deadline", context.Background, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e := newHarness(t, nil)
			e.fail(tc.err)
			msg := testkit.Record(t, notifyJob(), 5) // even on the final attempt
			if failed := testkit.Run(t, tc.ctx(), h.Runner, msg); len(failed) != 1 {
				t.Fatalf("failures %v; want a retry", failed)
			}
			if h.Trace.Has("mark-failed") || h.Queues.DeadCount() != 0 {
				t.Fatalf("a deadline marked the job failed or dead; trace %s", h.Trace)
			}
			if strings.Contains(h.Metrics.String(), engine.JobsFailed) {
				t.Fatalf("a deadline counted as a failure: %s", h.Metrics)
			}
		})
	}
}

func TestPermanentFailuresGoStraightToTheDLQ(t *testing.T) {
	good := notifyJob()
	goodBody, _ := good.Encode()
	unknown := notifyJob()
	unknown.Type = "test.notify.v9"
	unknownBody, _ := unknown.Encode()
	// Encode checks only the envelope's fields, so it also builds messages
	// whose args are invalid for their type.
	badArgsBody, _ := testkit.Envelope(notify.Name, map[string]string{"userId": "bob@example.com"}).Encode()
	extraArgBody, _ := testkit.Envelope(notify.Name, map[string]string{"userId": "u-1", "email": "x"}).Encode()
	for _, tc := range []struct {
		name, body, reason string
		handlerErr         error
	}{
		{"not JSON", "hello", "invalid JSON", nil},
		{"empty", "", "body", nil},
		{"JSON array", "[1,2]", "wrong type", nil},
		{"unknown field", strings.Replace(string(goodBody), `"v":1`, `"v":1,"secret":"x"`, 1), "unknown field", nil},
		{"nested args", strings.Replace(string(goodBody), `"userId":"u-123"`, `"userId":{"id":"u-123"}`, 1), "flat object of string IDs", nil},
		{"unknown type", string(unknownBody), "unknown job type", nil},
		{"e-mail address as arg", string(badArgsBody), "e-mail address", nil},
		{"undeclared arg", string(extraArgBody), "not an argument", nil},
		{"handler says permanent", string(goodBody), "user record corrupt", engine.Permanent(errors.New("user record corrupt"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e := newHarness(t, nil)
			e.fail(tc.handlerErr)
			msg := testkit.RawRecord(tc.body, 1)
			if failed := h.Run(t, msg); len(failed) != 0 {
				t.Fatalf("failures %v; a permanent failure must not be retried", failed)
			}
			reason, ok := h.Queues.DeadReason(msg.MessageId)
			if !ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("dead letter reason %q (sent %v); want it to mention %q", reason, ok, tc.reason)
			}
			if h.Trace.Has("send") {
				t.Fatal("sent mail for a permanently failed message")
			}
		})
	}
}

// Providers quote addresses in their error messages: only an error class
// and the provider's code leave the process — in the DLQ reason, the job
// record and the logs.
func TestProviderMessagesNeverLeave(t *testing.T) {
	sesErr := obstest.SESRejection()
	for _, tc := range []struct {
		name    string
		err     error
		attempt int
	}{
		{"permanent, dead-lettered", engine.Permanent(fmt.Errorf("email: send: %w", sesErr)), 1},
		{"transient, final attempt", fmt.Errorf("email: send: %w", sesErr), 5},
		{"transient, retried", fmt.Errorf("email: send: %w", sesErr), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e := newHarness(t, nil)
			e.fail(tc.err)
			env := notifyJob()
			msg := testkit.Record(t, env, tc.attempt)
			h.Run(t, msg)
			reason, _ := h.Queues.DeadReason(msg.MessageId)
			f, _ := h.Jobs.Failure(env.MessageID)
			for where, text := range map[string]string{"DLQ reason": reason, "job reason": f.Reason, "job class": f.Class, "logs": h.Logs.String()} {
				if strings.Contains(text, obstest.PII) || strings.Contains(text, "not verified") {
					t.Errorf("%s carries the provider's message: %s", where, text)
				}
			}
			if !strings.Contains(h.Logs.String(), "MessageRejected") {
				t.Errorf("logs lack the provider's error code: %s", h.Logs)
			}
		})
	}
}

func TestDeadLetterSendFailureIsRetried(t *testing.T) {
	h, _ := newHarness(t, nil)
	h.Queues.DeadErr = errors.New("SQS down")
	msg := testkit.RawRecord("not json", 1)
	if failed := h.Run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; a message that could not be dead-lettered must be retried, never dropped", failed)
	}
}

func TestDisabledJobIsParkedNotLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  message.Envelope
		off  string
	}{
		{"fail-closed default", testkit.EnvelopeFor(digest), ""},
		{"switched off", notifyJob(), notify.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHarness(t, nil)
			if tc.off != "" {
				h.Switches.Set(tc.off, false)
			}
			jt, _ := registry(t, true).Lookup(tc.env.Type)
			msg := testkit.Record(t, tc.env, 1)
			msg.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:" + string(jt.Queue) // it goes back where it came from
			if failed := h.Run(t, msg); len(failed) != 0 {
				t.Fatalf("failures %v; a parked job succeeds so the original is deleted", failed)
			}
			parked := h.Queues.ParkedMessages()
			if len(parked) != 1 || parked[0].Body != msg.Body || parked[0].Queue != string(jt.Queue) || parked[0].Delay != 2*time.Second {
				t.Fatalf("parked %+v; want the same body on %s after 2s", parked, jt.Queue)
			}
			if got := h.Trace.String(); got != "peek mark-parked park" {
				t.Fatalf("trace %q; want the peek, the record marked Parked, then the message parked, and nothing else", got)
			}
			if h.Jobs.Parks(tc.env.MessageID) != 1 || h.Count(tc.env.Type, engine.JobsParked) != 1 || h.Count(tc.env.Type, engine.JobsSkipped) != 1 {
				t.Errorf("parks %d, metrics %s", h.Jobs.Parks(tc.env.MessageID), h.Metrics)
			}
		})
	}
}

func TestParkFailureIsRetried(t *testing.T) {
	for name, fail := range map[string]func(*testkit.Harness){
		"message": func(h *testkit.Harness) { h.Queues.ParkErr = errors.New("SQS down") },
		"record":  func(h *testkit.Harness) { h.Jobs.Err = errors.New("DynamoDB down") },
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := newHarness(t, nil)
			h.Switches.Set(notify.Name, false)
			fail(h)
			msg := testkit.Record(t, notifyJob(), 1)
			if failed := h.Run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
				t.Fatalf("failures %v; an unparked job must be retried, never dropped", failed)
			}
		})
	}
}

// A cancelled job never runs: its tombstone marker is seen by the batch
// peek, by the lease when the peek failed, and by the park of a job whose
// switch is off.
func TestCancelledJobNeverRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*runner.Config)
		off    bool
	}{
		{"peek sees the tombstone", nil, false},
		{"lease sees it when the peek failed", func(c *runner.Config) { c.Markers = peekFails{c.Markers.(enginetest.Traced)} }, false},
		{"a parked job cancelled meanwhile", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e := newHarness(t, tc.mutate)
			env := notifyJob()
			if _, err := h.Markers.Store.Tombstone(context.Background(), key(env), time.Time{}); err != nil {
				t.Fatal(err)
			}
			if tc.off {
				h.Switches.Set(notify.Name, false)
				h.Jobs.SetState(env.MessageID, jobs.StateCancelled)
			}
			if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 {
				t.Fatalf("failures %v; a cancelled job's message is deleted", failed)
			}
			if e.sends(env.MessageID) != 0 || h.Trace.Has("claim") || len(h.Queues.ParkedMessages()) != 0 {
				t.Fatalf("a cancelled job ran, claimed or was parked; trace %s", h.Trace)
			}
			if got := h.Outcomes()[env.MessageID]; got != "cancelled" {
				t.Fatalf("outcome %q; want cancelled", got)
			}
		})
	}
}

// A handler that finds no work returns NoOp: a success whose marker is
// claimed and whose reason is recorded on the job.
func TestNoOpRecordsItsReason(t *testing.T) {
	h, _ := newHarness(t, func(c *runner.Config) {
		c.Handlers[notify.Name] = runner.HandlerFunc(func(context.Context, runner.Job) error {
			return engine.NoOp("no mail needed: user not found")
		})
	})
	env := notifyJob()
	if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if rec, ok := h.MarkerOf(env); !ok || !rec.Processed() {
		t.Fatal("a no-op job's marker is not claimed; its redeliveries would run again")
	}
	if o, r := h.Jobs.Outcome(env.MessageID); o != jobs.OutcomeNoop || r != "no mail needed: user not found" {
		t.Fatalf("recorded %q %q; want the no-op and its reason", o, r)
	}
	if h.Count(notify.Name, engine.JobsSkipped) != 1 || h.Outcomes()[env.MessageID] != "noop" {
		t.Fatalf("metrics %s outcomes %v", h.Metrics, h.Outcomes())
	}
	if !strings.Contains(h.Metrics.String(), `"JobsNoop":1`) || !strings.Contains(h.Metrics.String(), `"reason":"other"`) {
		t.Fatalf("a no-op without a kind is not counted as JobsNoop, reason other: %s", h.Metrics)
	}
}

// A no-op with a kind is counted by that kind (the users-directory alarm
// watches JobsNoop with reason user-not-found).
func TestNoOpIsCountedByItsKind(t *testing.T) {
	h, _ := newHarness(t, func(c *runner.Config) {
		c.Handlers[notify.Name] = runner.HandlerFunc(func(context.Context, runner.Job) error {
			return engine.NoOpKind("user-not-found", "no mail needed: user not found")
		})
	})
	for range 2 {
		if failed := h.Run(t, testkit.Record(t, notifyJob(), 1)); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
	}
	var n int
	for _, l := range obstest.Lines(h.Metrics.String()) {
		if l["reason"] == "user-not-found" && l["type"] == notify.Name {
			v, _ := l[engine.JobsNoop].(float64)
			n += int(v)
		}
	}
	if n != 2 {
		t.Fatalf("JobsNoop by user-not-found = %d; want 2: %s", n, h.Metrics)
	}
}

func TestLeaseHeldByTwinRetries(t *testing.T) {
	h, _ := newHarness(t, nil)
	env := notifyJob()
	if _, err := h.Markers.Store.Lease(context.Background(), key(env), engine.Mark{Owner: "twin", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	msg := testkit.Record(t, env, 5) // even the final attempt is not a failure
	if failed := h.Run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want a retry while the twin holds the lease", failed)
	}
	if h.Trace.Has("load") || h.Trace.Has("release") || h.Trace.Has("mark-failed") {
		t.Fatalf("ran, released the twin's lease or failed the job; trace: %s", h.Trace)
	}
	if strings.Contains(h.Metrics.String(), engine.JobsFailed) {
		t.Fatal("a busy lease counted as a failure")
	}
}

type peekFails struct{ enginetest.Traced }

func (peekFails) PeekBatch(context.Context, []engine.Key) (map[engine.Key]engine.Record, error) {
	return nil, errors.New("throttled")
}

// A failed peek is not fatal where a lease doubles as a peek; a type without
// a lease is retried rather than run blind.
func TestPeekFailure(t *testing.T) {
	h, e := newHarness(t, func(c *runner.Config) { c.Markers = peekFails{c.Markers.(enginetest.Traced)} })
	done := notifyJob()
	if _, err := h.Markers.Store.Claim(context.Background(), key(done), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	fresh := testkit.Record(t, notifyJob(), 1)
	noLease := testkit.Record(t, testkit.EnvelopeFor(payout), 1)
	failed := h.Run(t, testkit.Record(t, done, 1), fresh, noLease)
	if !slices.Equal(failed, []string{noLease.MessageId}) {
		t.Fatalf("failures %v; want only the type without a lease retried", failed)
	}
	if e.sends(done.MessageID) != 0 {
		t.Fatal("ran a processed job because the peek failed; the lease must catch it")
	}
}

type claimFails struct {
	enginetest.Traced
	failures    *atomic.Int32 // how many claims fail before one works
	sawDeadline *atomic.Bool
}

func (c claimFails) Claim(ctx context.Context, k engine.Key, mk engine.Mark) (bool, error) {
	if _, ok := ctx.Deadline(); ok {
		c.sawDeadline.Store(true)
	}
	if c.failures.Add(-1) >= 0 {
		c.Trace.Add("claim-failed")
		return false, errors.New("ProvisionedThroughputExceededException")
	}
	return c.Traced.Claim(ctx, k, mk)
}

// Step 9: an effect that completed is never re-run on purpose. A claim that
// fails is retried within the invocation; when it keeps failing the record
// is reported done (not retried, never Failed), counted ClaimFailed, and
// its job record says Succeeded, since its marker cannot.
func TestClaimFailureAfterEffect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int32
		want      string
		metric    string
		unclaimed bool
	}{
		{"a retry within the invocation succeeds", 2, "succeeded", engine.JobsSucceeded, false},
		{"every try fails", 10, "claim-failed", engine.ClaimFailed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			var sawDeadline atomic.Bool
			n.Store(tc.failures)
			h, e := newHarness(t, func(c *runner.Config) {
				c.Markers = claimFails{Traced: c.Markers.(enginetest.Traced), failures: &n, sawDeadline: &sawDeadline}
			})
			env := notifyJob()
			if failed := h.Run(t, testkit.Record(t, env, 5)); len(failed) != 0 {
				t.Fatalf("failures %v; a completed effect is reported done", failed)
			}
			if e.sends(env.MessageID) != 1 || h.Trace.Has("mark-failed") || h.Queues.DeadCount() != 0 {
				t.Fatalf("sends %d; trace %s: the effect ran once and the job must never read Failed", e.sends(env.MessageID), h.Trace)
			}
			if got := h.Outcomes()[env.MessageID]; got != tc.want || h.Count(notify.Name, tc.metric) != 1 {
				t.Fatalf("outcome %q, metrics %s; want %s and %s", got, h.Metrics, tc.want, tc.metric)
			}
			if !sawDeadline.Load() {
				t.Fatal("the claim ran without a deadline of its own")
			}
			state, marked := h.Jobs.State(env.MessageID)
			if marked != tc.unclaimed || (tc.unclaimed && state != jobs.StateSucceeded) {
				t.Fatalf("job record %q (written: %v); want Succeeded written only when every claim failed", state, marked)
			}
		})
	}
}

// Claims run under a context the invocation cannot cancel, but with their
// own short deadline: a hung call never outlives the invocation.
func TestHungClaimHasItsOwnDeadline(t *testing.T) {
	h, _ := newHarness(t, func(c *runner.Config) {
		c.WriteTimeout, c.ClaimAttempts = 50*time.Millisecond, 1
		c.Markers = hungClaims{c.Markers.(enginetest.Traced)}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the invocation is already over: the claim must still run, bounded
	done := make(chan []string, 1)
	env := notifyJob()
	go func() { done <- testkit.Run(t, context.WithoutCancel(ctx), h.Runner, testkit.Record(t, env, 1)) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a hung claim held the invocation")
	}
	if got := h.Outcomes()[env.MessageID]; got != "claim-failed" {
		t.Fatalf("outcome %q; want claim-failed", got)
	}
}

type hungClaims struct{ enginetest.Traced }

func (hungClaims) Claim(ctx context.Context, _ engine.Key, _ engine.Mark) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func TestMixedBatchPartialResponse(t *testing.T) {
	h, _ := newHarness(t, nil)
	ok1, ok2 := testkit.Record(t, notifyJob(), 1), testkit.Record(t, notifyJob(), 1)
	poison := testkit.RawRecord(`{"v":1}`, 1)
	parked := testkit.Record(t, testkit.EnvelopeFor(digest), 1)
	busyEnv := notifyJob()
	if _, err := h.Markers.Store.Lease(context.Background(), key(busyEnv), engine.Mark{Owner: "twin", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	busy := testkit.Record(t, busyEnv, 1)
	dupEnv := notifyJob()
	if _, err := h.Markers.Store.Claim(context.Background(), key(dupEnv), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	dup := testkit.Record(t, dupEnv, 1)
	failed := h.Run(t, ok1, poison, busy, parked, dup, ok2)
	if !slices.Equal(failed, []string{busy.MessageId}) {
		t.Fatalf("failures %v; want only the busy record %s", failed, busy.MessageId)
	}
	if h.Queues.DeadCount() != 1 || len(h.Queues.ParkedMessages()) != 1 || h.Trace.Count("send") != 2 {
		t.Fatalf("dead %d parked %d sent %d; want 1 1 2", h.Queues.DeadCount(), len(h.Queues.ParkedMessages()), h.Trace.Count("send"))
	}
	if h.Trace.Count("peek") != 1 {
		t.Fatalf("want one peek for the whole batch; trace %s", h.Trace)
	}
	if n := strings.Count(h.Logs.String(), `"msg":"job outcome"`); n != 6 {
		t.Fatalf("%d outcome lines; want exactly one per record (6)", n)
	}
}

// The same message twice in one batch runs concurrently: the lease lets one
// through; the other is retried and then absorbed.
func TestSameMessageTwiceInOneBatchSendsOnce(t *testing.T) {
	h, e := newHarness(t, nil)
	env := notifyJob()
	failed := h.Run(t, testkit.Record(t, env, 1), testkit.Record(t, env, 1))
	if len(failed) > 1 {
		t.Fatalf("failures %v", failed)
	}
	h.Run(t, testkit.Record(t, env, 2))
	if n := e.sends(env.MessageID); n != 1 {
		t.Fatalf("sent %d times; want 1", n)
	}
}

// The records of a batch run concurrently, bounded by Concurrency: every
// record of a batch of 10 is in its effect at the same time (each waits for
// all the others), and with Concurrency 3 never more than 3 are.
func TestBatchRunsConcurrently(t *testing.T) {
	for _, limit := range []int{0, 3} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var inFlight, peak atomic.Int32
			all := make(chan struct{})
			var once sync.Once
			h, _ := newHarness(t, func(c *runner.Config) {
				c.Concurrency = limit
				c.Handlers[notify.Name] = runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error {
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					if limit == 0 && n == 10 {
						once.Do(func() { close(all) })
					}
					if limit == 0 {
						select {
						case <-all:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					return nil
				})
			})
			var msgs []events.SQSMessage
			for range 10 {
				msgs = append(msgs, testkit.Record(t, notifyJob(), 1))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if failed := testkit.Run(t, ctx, h.Runner, msgs...); len(failed) != 0 {
				t.Fatalf("failures %v; the records did not all run at once", failed)
			}
			want := int32(10)
			if limit > 0 {
				want = int32(limit)
			}
			if got := peak.Load(); (limit == 0 && got != want) || (limit > 0 && got > want) {
				t.Fatalf("peak concurrency %d; want %d", got, want)
			}
		})
	}
}

// A money-like type chooses claim-then-effect: it never runs twice; an
// effect that fails after its claim is dead-lettered, its marker says
// FAILED (the job reads Failed), and only a redrive runs it again.
func TestClaimThenEffect(t *testing.T) {
	h, e := newHarness(t, nil)
	env := testkit.EnvelopeFor(payout)
	if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if got, want := h.Trace.String(), "peek claim load send"; got != want {
		t.Fatalf("trace %q; want %q (claim before effect)", got, want)
	}
	h.Trace.Reset()
	h.Run(t, testkit.Record(t, env, 1))
	if h.Trace.Has("load") {
		t.Fatal("claim-then-effect type ran twice")
	}

	e.fail(errors.New("bank said no"))
	failing := testkit.EnvelopeFor(payout)
	msg := testkit.Record(t, failing, 1)
	if failed := h.Run(t, msg); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if r, _ := h.Queues.DeadReason(msg.MessageId); !strings.Contains(r, "effect failed after its claim") {
		t.Fatalf("dead letter reason %q; want the failed claimed effect recorded", r)
	}
	m, _ := h.MarkerOf(failing)
	if m.State != engine.StateFailed || jobs.Derive(jobs.StateEnqueued, time.Now(), m, true, time.Now()) != jobs.StateFailed {
		t.Fatalf("marker %+v; want FAILED, which reads Failed", m)
	}
	// A redelivery (the DLQ send of an earlier try failed) is dead-lettered
	// again, never run.
	e.fail(nil)
	again := testkit.Record(t, failing, 2)
	h.Run(t, again)
	if _, ok := h.Queues.DeadReason(again.MessageId); !ok || e.sends(failing.MessageID) != 0 {
		t.Fatal("a FAILED claim-then-effect job ran on redelivery")
	}
	// A redrive clears the marker; then the effect runs again, once.
	if err := h.Markers.Store.ResetFailed(context.Background(), key(failing)); err != nil {
		t.Fatal(err)
	}
	h.Run(t, testkit.Record(t, failing, 1))
	if e.sends(failing.MessageID) != 1 {
		t.Fatalf("after the redrive the effect ran %d times; want 1", e.sends(failing.MessageID))
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	reg := registry(t, true)
	q := &testkit.Queues{}
	sw := &testkit.Switches{}
	for name, cfg := range map[string]runner.Config{
		"no registry": {Switch: sw, Markers: enginetest.Traced{}, Parker: q},
		"no toggles":  {Registry: reg, Markers: enginetest.Traced{}, Parker: q},
		"no markers":  {Registry: reg, Switch: sw, Parker: q},
		"no parker":   {Registry: reg, Switch: sw, Markers: enginetest.Traced{}},
		"handler for unknown type": {Registry: reg, Switch: sw, Markers: enginetest.Traced{}, Parker: q,
			Handlers: map[string]runner.Handler{"test.nope.v1": runner.HandlerFunc(nil)}},
	} {
		if _, err := runner.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestNothingStartsInsideTheDeadlineMargin(t *testing.T) {
	h, _ := newHarness(t, func(c *runner.Config) { c.DeadlineMargin = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	msgs := []events.SQSMessage{testkit.Record(t, notifyJob(), 5), testkit.Record(t, notifyJob(), 1)}
	if failed := testkit.Run(t, ctx, h.Runner, msgs...); len(failed) != 2 {
		t.Fatalf("failures %v; want both retried", failed)
	}
	if h.Trace.Has("load") || h.Trace.Has("mark-failed") {
		t.Fatalf("work started or a job was marked Failed inside the margin; trace %s", h.Trace)
	}
}

func TestSlowEffectIsCutOffBeforeTheDeadline(t *testing.T) {
	h, _ := newHarness(t, func(c *runner.Config) {
		c.DeadlineMargin = 500 * time.Millisecond
		c.Handlers[notify.Name] = runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error {
			<-ctx.Done()
			return ctx.Err()
		})
	})
	deadline := time.Now().Add(time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if failed := testkit.Run(t, ctx, h.Runner, testkit.Record(t, notifyJob(), 1)); len(failed) != 1 {
		t.Fatalf("failures %v; want a retry", failed)
	}
	if time.Now().After(deadline) {
		t.Fatal("the batch response came back after the deadline")
	}
	if h.Trace.Has("claim") {
		t.Fatal("claimed an effect that did not finish")
	}
}

func TestTwinClaimedFirstCountsAsDuplicate(t *testing.T) {
	var h *testkit.Harness
	h, _ = newHarness(t, func(c *runner.Config) {
		c.Registry = registry(t, false)
		c.Handlers[notify.Name] = runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
			// A twin without a lease finishes while this effect runs.
			_, err := h.Markers.Store.Claim(ctx, key(job.Envelope), engine.Mark{})
			return err
		})
	})
	if failed := h.Run(t, testkit.Record(t, notifyJob(), 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if h.Count(notify.Name, engine.JobsDuplicate) != 1 || h.Count(notify.Name, engine.JobsSucceeded) != 0 {
		t.Fatalf("metrics %s; want the twin's claim counted as a duplicate", h.Metrics)
	}
}

func TestInvalidArgsKeepTheTypeDimension(t *testing.T) {
	h, _ := newHarness(t, nil)
	body, _ := testkit.Envelope(notify.Name, map[string]string{"userId": "a@b.c"}).Encode()
	h.Run(t, testkit.RawRecord(string(body), 1))
	if obstest.Count(h.Metrics.String(), notify.Name, engine.JobsFailed) != 1 {
		t.Fatalf("metrics %s; want JobsFailed under the job's type", h.Metrics)
	}
}

// Every log line of a job carries its jobId, type, key and the trace id the
// message carried from the enqueue request.
func TestJobLogLinesCarryTheTrace(t *testing.T) {
	h, _ := newHarness(t, nil)
	env := notifyJob()
	msg := testkit.Record(t, env, 1)
	msg.Attributes["AWSTraceHeader"] = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
	h.Run(t, msg)
	outcome := false
	for _, l := range obstest.Lines(h.Logs.String()) {
		if l[obs.KeyJobID] == nil {
			continue // a line about the batch, not the job
		}
		outcome = outcome || l["msg"] == "job outcome"
		if l[obs.KeyTraceID] != "1-5759e988-bd862e3fe1be46a994272793" || l[obs.KeyJobID] != env.MessageID || l[obs.KeyMessageID] != env.MessageID || l[obs.KeyKey] != env.Key {
			t.Errorf("line %v lacks the trace id, job id or key", l)
		}
	}
	if !outcome {
		t.Fatal("no outcome line")
	}
}
