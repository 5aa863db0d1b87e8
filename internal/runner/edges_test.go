package runner_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// The edges of a job's life a review found; each test fails on the runner
// as it was before the fix.

// hungDeadLetters is a dead-letter queue that never answers: each call
// waits for its context.
type hungDeadLetters struct{ *testkit.Queues }

func (hungDeadLetters) DeadLetter(ctx context.Context, _ events.SQSMessage, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// hungJobs is a jobs table that never answers a write.
type hungJobs struct{ engine.JobRecorder }

func (hungJobs) MarkFailed(ctx context.Context, _ string, _ engine.Failure) error {
	<-ctx.Done()
	return ctx.Err()
}

func (hungJobs) MarkUnclaimed(ctx context.Context, _, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// throttledClaims answers every claim with a throttling error after a
// while, as DynamoDB does under load.
type throttledClaims struct{ enginetest.Traced }

func (throttledClaims) Claim(ctx context.Context, _ engine.Key, _ engine.Mark) (bool, error) {
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(150 * time.Millisecond):
		return false, errors.New("ThrottlingException: rate exceeded")
	}
}

// Edge 1: every write after the deadline margin is bounded by the time left
// before the real deadline, so the batch response always gets back. The
// effect (or the failure) ends just before the margin and the store is slow,
// so its writes run into the margin; each write alone could take its 3 s
// timeout, the claim 3 tries.
func TestWritesInsideTheMarginEndBeforeTheDeadline(t *testing.T) {
	const margin = 600 * time.Millisecond
	effectEnds := func(err error) runner.Handler {
		return runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error {
			time.Sleep(margin / 4) // the work ends just before the margin
			return err
		})
	}
	for _, tc := range []struct {
		name    string
		receive int
		mutate  func(*runner.Config)
		want    string
		retried bool
	}{
		{"hung claim", 1, func(c *runner.Config) {
			c.Markers = hungClaims{c.Markers.(enginetest.Traced)}
			c.Handlers[notify.Name] = effectEnds(nil)
		}, "claim-failed", false},
		{"throttled claim, then a hung unclaimed mark", 1, func(c *runner.Config) {
			c.Markers = throttledClaims{c.Markers.(enginetest.Traced)}
			c.Jobs = hungJobs{c.Jobs}
			c.Handlers[notify.Name] = effectEnds(nil)
		}, "claim-failed", false},
		{"hung dead letter", 1, func(c *runner.Config) {
			c.DeadLetterer = hungDeadLetters{c.DeadLetterer.(*testkit.Queues)}
			c.Handlers[notify.Name] = effectEnds(engine.Permanent(errors.New("bad address")))
		}, "retry", true},
		{"hung Failed mark on the final attempt", 5, func(c *runner.Config) {
			c.Jobs = hungJobs{c.Jobs}
			c.Handlers[notify.Name] = effectEnds(errors.New("SES down"))
		}, "failed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHarness(t, func(c *runner.Config) {
				c.DeadlineMargin = margin
				tc.mutate(c)
			})
			deadline := time.Now().Add(margin + margin/2)
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			env := notifyJob()
			failed := testkit.Run(t, ctx, h.Runner, testkit.Record(t, env, tc.receive))
			if now := time.Now(); now.After(deadline) {
				t.Fatalf("the batch response came back %s after the deadline", now.Sub(deadline))
			}
			if got := h.Outcomes()[env.MessageID]; got != tc.want || (len(failed) == 1) != tc.retried {
				t.Fatalf("outcome %q, failures %v; want %s (retried: %v)", got, failed, tc.want, tc.retried)
			}
		})
	}
}

// A handler that ignores its context cannot hold the response either: the
// record is retried, and what it does afterwards is dropped.
func TestHandlerIgnoringItsContextIsLeftBehind(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h, _ := newHarness(t, func(c *runner.Config) {
		c.DeadlineMargin = 400 * time.Millisecond
		c.Handlers[notify.Name] = runner.HandlerFunc(func(context.Context, runner.Job) error {
			<-release
			return nil
		})
	})
	deadline := time.Now().Add(700 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := testkit.EnvelopeFor(payout)
	if _, err := h.Markers.Store.Claim(context.Background(), key(done), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	stuck, fine := testkit.Record(t, notifyJob(), 1), testkit.Record(t, done, 1)
	failed := testkit.Run(t, ctx, h.Runner, stuck, fine)
	if time.Now().After(deadline) {
		t.Fatal("a handler that ignores its context held the response past the deadline")
	}
	if !slices.Equal(failed, []string{stuck.MessageId}) {
		t.Fatalf("failures %v; want only the stuck record retried", failed)
	}
}

// panicky is a notify handler that panics for one user and sends for the
// others.
type panicky struct{ e *effects }

func (p *panicky) Handle(ctx context.Context, job runner.Job) error {
	if job.Envelope.Args["userId"] == "u-panic" {
		var m map[string]int
		m["boom"]++ // a nil map write: a runtime panic
	}
	return p.e.Handle(ctx, job)
}

// Edge 2: a handler that panics fails its own record only. Its neighbours
// are claimed and reported done; the panicking record is retried with its
// lease released, and on its final attempt the job reads Failed.
func TestPanickingHandlerFailsOnlyItsRecord(t *testing.T) {
	for _, receive := range []int{1, 5} {
		p := &panicky{}
		h, e := newHarness(t, func(c *runner.Config) { c.Handlers[notify.Name] = p })
		p.e = e
		bad := testkit.Envelope(notify.Name, map[string]string{"userId": "u-panic"})
		good1, good2 := notifyJob(), notifyJob()
		badMsg := testkit.Record(t, bad, receive)
		failed := h.Run(t, testkit.Record(t, good1, 1), badMsg, testkit.Record(t, good2, 1))
		if !slices.Equal(failed, []string{badMsg.MessageId}) {
			t.Fatalf("receive %d: failures %v; want only the panicking record", receive, failed)
		}
		for _, g := range []message.Envelope{good1, good2} {
			if rec, ok := h.MarkerOf(g); !ok || !rec.Processed() || e.sends(g.MessageID) != 1 {
				t.Fatalf("a neighbour of the panic was not sent once and claimed: %+v", rec)
			}
		}
		rec, ok := h.MarkerOf(bad)
		switch {
		case receive == 1 && ok:
			t.Fatalf("the panicking record's lease was not released: %+v", rec)
		case receive == 5:
			f, marked := h.Jobs.Failure(bad.MessageID)
			if !marked || f.Class != "panic" || rec.State != engine.StateFailed {
				t.Fatalf("final attempt of a panic: failure %+v (%v), marker %+v; want Failed with class panic", f, marked, rec)
			}
		}
		if !strings.Contains(h.Logs.String(), "the work panicked") {
			t.Fatal("the panic was not logged")
		}
	}
}

// Edge 3: a record whose switch is off is peeked too. A late copy of a job
// that is done, cancelled or failed is dropped (or dead-lettered), never
// parked again, and its record is not rewritten to Parked.
func TestDisabledCopyOfASettledJobIsNotParked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		settle func(context.Context, *memstore.Store, engine.Key) error
		want   string
	}{
		{"done", func(ctx context.Context, m *memstore.Store, k engine.Key) error {
			_, err := m.Claim(ctx, k, engine.Mark{})
			return err
		}, "duplicate"},
		{"cancelled, its record update lost", func(ctx context.Context, m *memstore.Store, k engine.Key) error {
			_, err := m.Tombstone(ctx, k, time.Time{})
			return err
		}, "cancelled"},
		{"failed", func(ctx context.Context, m *memstore.Store, k engine.Key) error {
			return m.Fail(ctx, k, engine.Mark{})
		}, "dead-lettered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e := newHarness(t, nil)
			env := testkit.EnvelopeFor(digest) // fail-closed: its switch is off
			if err := tc.settle(context.Background(), h.Markers.Store, key(env)); err != nil {
				t.Fatal(err)
			}
			if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 {
				t.Fatalf("failures %v; want none", failed)
			}
			if len(h.Queues.ParkedMessages()) != 0 || h.Jobs.Parks(env.MessageID) != 0 || e.sends(env.MessageID) != 0 {
				t.Fatalf("a settled job was parked (%d, record %d) or ran; trace %s", len(h.Queues.ParkedMessages()), h.Jobs.Parks(env.MessageID), h.Trace)
			}
			if got := h.Outcomes()[env.MessageID]; got != tc.want {
				t.Fatalf("outcome %q; want %s", got, tc.want)
			}
		})
	}
}

// A disabled record is parked even when the peek failed: parking runs
// nothing.
func TestDisabledRecordParksWhenThePeekFails(t *testing.T) {
	h, _ := newHarness(t, func(c *runner.Config) { c.Markers = peekFails{c.Markers.(enginetest.Traced)} })
	env := testkit.EnvelopeFor(digest)
	if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 || len(h.Queues.ParkedMessages()) != 1 {
		t.Fatalf("failures %v, parked %d; want parked", failed, len(h.Queues.ParkedMessages()))
	}
}

// Suspected, settled: a job marked Failed on one copy's final attempt while
// another copy of it is still queued. The final attempt turns its lease into
// a FAILED marker, so the other copy is dead-lettered, never run: the job
// keeps reading Failed until an operator redrives it.
func TestFailedJobsOtherCopyDoesNotRun(t *testing.T) {
	h, e := newHarness(t, nil)
	env := notifyJob()
	e.fail(errors.New("SES down"))
	if failed := h.Run(t, testkit.Record(t, env, 5)); len(failed) != 1 {
		t.Fatalf("final attempt: failures %v; want the record", failed)
	}
	if rec, ok := h.MarkerOf(env); !ok || rec.State != engine.StateFailed {
		t.Fatalf("marker after the final attempt = %+v (%v); want FAILED", rec, ok)
	}
	e.fail(nil) // SES is back; the other copy arrives
	other := testkit.Record(t, env, 2)
	if failed := h.Run(t, other); len(failed) != 0 {
		t.Fatalf("other copy: failures %v; want it dead-lettered", failed)
	}
	if e.sends(env.MessageID) != 0 || h.Outcomes()[env.MessageID] != "dead-lettered" {
		t.Fatalf("the other copy of a Failed job ran (%d sends, outcome %s)", e.sends(env.MessageID), h.Outcomes()[env.MessageID])
	}
	if reason, ok := h.Queues.DeadReason(other.MessageId); !ok || !strings.Contains(reason, "already failed") {
		t.Fatalf("dead-letter reason %q (%v); want it to say the job already failed", reason, ok)
	}
}

// panicOnClaim is a marker store whose Claim panics for one job: a panic in
// an adapter, outside the handler.
type panicOnClaim struct {
	engine.Store
	jobID string
}

func (p panicOnClaim) Claim(ctx context.Context, k engine.Key, mk engine.Mark) (bool, error) {
	if k.JobID == p.jobID {
		panic("store adapter bug")
	}
	return p.Store.Claim(ctx, k, mk)
}

// Edge 2, outside the handler: a panic elsewhere in a record's pipeline (an
// adapter's claim here) is recovered by the record's own goroutine. The
// record is retried, and its neighbours are claimed and answered.
func TestPanicOutsideTheHandlerFailsOnlyItsRecord(t *testing.T) {
	bad := notifyJob()
	h, e := newHarness(t, func(c *runner.Config) { c.Markers = panicOnClaim{Store: c.Markers, jobID: bad.MessageID} })
	good1, good2 := notifyJob(), notifyJob()
	badMsg := testkit.Record(t, bad, 1)
	failed := h.Run(t, testkit.Record(t, good1, 1), badMsg, testkit.Record(t, good2, 1))
	if !slices.Equal(failed, []string{badMsg.MessageId}) {
		t.Fatalf("failures %v; want only the record whose claim panicked", failed)
	}
	for _, g := range []message.Envelope{good1, good2} {
		if rec, ok := h.MarkerOf(g); !ok || !rec.Processed() || e.sends(g.MessageID) != 1 {
			t.Fatalf("a neighbour of the panic was not sent once and claimed: %+v", rec)
		}
	}
	if !strings.Contains(h.Logs.String(), "the runner panicked on this record") {
		t.Fatal("the panic was not logged")
	}
}
