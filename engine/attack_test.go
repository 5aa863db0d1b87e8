package engine_test

// Attacks on the runner: each test here names a way a record can be lost,
// run twice, outlive its guard or be reported in a false state, and fails
// while the defect is there.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/runstwice/runstwice/engine"
)

// handleRecovering runs a batch and returns the ids SQS must retry, and
// the value HandleSQS panicked with (nil when it returned).
func (w *world) handleRecovering(records ...events.SQSMessage) (failed []string, panicked any) {
	w.t.Helper()
	defer func() { panicked = recover() }()
	return w.handle(records...), nil
}

// A user's Key, Decode, Fingerprint, LogAttrs, Due or Traceparent may
// panic on one payload. They run while the batch is decoded, on the
// invocation's goroutine and outside the records' recover, so the panic
// leaves HandleSQS: the Lambda runtime fails the whole invocation and
// every record of the batch is retried with the poison one, until the
// queue's redrive policy sends the good neighbours to the DLQ with it.
// HandleSQS promises "one bad record never fails its neighbours": the bad
// record must fail alone (retried or dead-lettered, never run) and the
// good one must run.
func TestAttackPanicInAKindFunctionFailsTheWholeBatch(t *testing.T) {
	bad := func(o order) {
		if o.ID == "bad" {
			panic("a user's function panicked on this payload")
		}
	}
	withKey := shipKind
	withKey.Key = func(o order) (string, error) { bad(o); return o.ID, nil }
	withDecode := shipKind
	withDecode.Decode = func(b []byte) (order, error) {
		if strings.Contains(string(b), `"bad"`) {
			panic("decode panicked")
		}
		var o order
		err := json.Unmarshal(b, &o)
		return o, err
	}
	withFingerprint := shipKind
	withFingerprint.Fingerprint = func(o order) ([]byte, error) { bad(o); return []byte(o.ID), nil }
	withLogAttrs := shipKind
	withLogAttrs.LogAttrs = func(o order) []slog.Attr { bad(o); return nil }
	withDue := shipKind
	withDue.Due = func(o order) time.Time { bad(o); return time.Time{} }
	withTrace := shipKind
	withTrace.Traceparent = func(o order) string { bad(o); return "" }
	for _, tc := range []struct {
		name string
		kind engine.Kind[order]
	}{
		{"Key", withKey}, {"Decode", withDecode}, {"Fingerprint", withFingerprint},
		{"LogAttrs", withLogAttrs}, {"Due", withDue}, {"Traceparent", withTrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.kind, nil)
			poison, good := record(orderBody("bad", 1), 1), record(orderBody("good", 1), 1)
			failed, panicked := w.handleRecovering(poison, good)
			if panicked != nil {
				t.Fatalf("HandleSQS panicked (%v): the whole batch fails with its poison record, the good one is never run", panicked)
			}
			if w.runs("good") != 1 || w.runs("bad") != 0 {
				t.Fatalf("runs %v; want the good record run and the poison one not", w.calls)
			}
			_, dead := w.queues.DeadReason(poison.MessageId)
			if !dead && strings.Join(failed, " ") != poison.MessageId {
				t.Fatalf("failures %v, dead-lettered %v; want the poison record retried or dead-lettered alone", failed, dead)
			}
		})
	}
	t.Run("Mux route", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		mux, err := engine.NewMux(engine.Options{Store: w.store, Logger: slog.New(slog.DiscardHandler)},
			func(b []byte) (order, error) { var o order; err := json.Unmarshal(b, &o); return o, err },
			func(o order) string { bad(o); return "ship" })
		if err != nil {
			t.Fatal(err)
		}
		if err := mux.Handle("ship", shipKind, w.work); err != nil {
			t.Fatal(err)
		}
		var panicked any
		func() {
			defer func() { panicked = recover() }()
			_, _ = mux.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(orderBody("bad", 1), 1), record(orderBody("good", 1), 1)}})
		}()
		if panicked != nil || w.runs("good") != 1 {
			t.Fatalf("HandleSQS panicked (%v), runs %v; want the poison record failed alone", panicked, w.calls)
		}
	})
}

// Two records of one key in one batch of a FIFO queue, in two message
// groups, run in two lanes at once: the batch peek found no marker for
// either, so both run the work (the second's claim merely loses). The
// rule is that records of one key run one at a time in a batch and the
// second is a duplicate; a FIFO batch breaks it whenever one job is sent
// under two groups (a retry by a producer that picks the group per send).
// Kinesis and DynamoDB stream shards are lanes too, so a key seen on two
// shards (a re-sharded stream, a producer retry under another partition
// key) runs twice as well.
func TestAttackOneKeyInTwoFIFOGroupsRunsTwice(t *testing.T) {
	t.Run("FIFO", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		if failed := w.handle(fifo(orderBody("o-1", 12), "A"), fifo(orderBody("o-1", 12), "B")); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
		if n := w.runs("o-1"); n != 1 {
			t.Fatalf("the work ran %d times for one key in one batch; want once (the second a duplicate)", n)
		}
	})
	t.Run("Kinesis shards", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		if failed := w.kinesis(kinesis("shardId-1", "1", orderBody("o-1", 12)), kinesis("shardId-2", "1", orderBody("o-1", 12))); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
		if n := w.runs("o-1"); n != 1 {
			t.Fatalf("the work ran %d times for one key in one batch; want once", n)
		}
	})
}

// A claim-then-effect job claims its marker first, so the done cache
// remembers the key as done; then its effect fails, its marker turns
// FAILED and it is dead-lettered. The cache still says done. When an
// operator redrives the letter (the marker's FAILED is cleared, as the
// docs say "only a redrive runs it again"), the copy lands on the same
// warm environment, the cache drops it as a duplicate without a read, and
// the job is acknowledged without ever having run: lost.
func TestAttackDoneCacheSaysDoneForAJobThatFailedAfterItsClaim(t *testing.T) {
	k := shipKind
	k.Bias = engine.ClaimThenEffect
	w := newWorld(t, k, func(o *engine.Options) { o.DoneCache = 100 })
	mem := w.store.Store
	w.fail["o-1"] = errors.New("bank down")
	first := record(orderBody("o-1", 12), 1)
	w.handle(first)
	if _, ok := w.queues.DeadReason(first.MessageId); !ok {
		t.Fatal("the failed claim-then-effect job was not dead-lettered")
	}
	// The operator's redrive: the FAILED marker is cleared and the letter
	// goes back to the queue.
	if err := mem.ResetFailed(context.Background(), engine.Key{Type: k.Name, JobID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	delete(w.fail, "o-1")
	redriven := record(orderBody("o-1", 12), 1)
	if failed := w.handle(redriven); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if n := w.runs("o-1"); n != 2 {
		t.Fatalf("the redriven job ran %d times in all; want it run again (2): the done cache acked it as a duplicate", n)
	}
}

// failingFail is a store whose Fail write fails (a throttle, a timeout),
// and whose other calls work.
// failingFail throttles the first two Fail writes, as DynamoDB does under
// load; the third gets through.
type failingFail struct {
	engine.Store
	n *atomic.Int32
}

func (f failingFail) Fail(ctx context.Context, k engine.Key, m engine.Mark) error {
	if f.n.Add(1) <= 2 {
		return errors.New("ProvisionedThroughputExceededException")
	}
	return f.Store.Fail(ctx, k, m)
}

// A claim-then-effect job whose effect fails is dead-lettered and its
// marker is to say FAILED, so a redrive (which clears FAILED markers) runs
// it again. When the FAILED write itself is throttled (twice, here), the
// runner logs it and dead-letters the record anyway, "best effort": the
// marker stays DONE. The redrive's reset finds no FAILED marker, the
// redriven copy peeks DONE and is acknowledged as a duplicate: the effect
// failed, and the job never runs again.
func TestAttackFailedMarkerWriteLosesAClaimThenEffectJob(t *testing.T) {
	k := shipKind
	k.Bias = engine.ClaimThenEffect
	w := newWorld(t, k, nil)
	mem := w.store.Store
	h, err := engine.NewHandler(k, w.work, engine.Options{Store: failingFail{w.store, &atomic.Int32{}}, DeadLetterer: w.queues, Parker: w.queues,
		Logger: slog.New(slog.DiscardHandler), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	w.fail["o-1"] = errors.New("bank down")
	first := record(orderBody("o-1", 12), 1)
	failed := w.handle(first)
	_, dead := w.queues.DeadReason(first.MessageId)
	// The redrive an operator runs for a dead letter.
	if err := mem.ResetFailed(context.Background(), engine.Key{Type: k.Name, JobID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	delete(w.fail, "o-1")
	again := record(orderBody("o-1", 12), 1)
	if !dead && len(failed) == 1 {
		again = first // still in its queue: its own retry
	}
	w.handle(again)
	if n := w.runs("o-1"); n != 2 {
		t.Fatalf("after the effect failed (dead-lettered %v) and a redrive, the job ran %d times in all; want 2: its marker says DONE, so it is acked and never runs", dead, n)
	}
}

// peekDown fails every peek; its writes work.
type peekDown struct{ engine.Store }

func (peekDown) PeekBatch(context.Context, []engine.Key) (map[engine.Key]engine.Record, error) {
	return nil, errors.New("ThrottlingException")
}

// Admit "runs once the key is known not to be done". When the batch peek
// fails, nothing is known, yet Admit runs before the lease (or the
// peek-failed retry) finds out: for a job that is done, Admit records it
// as existing again (the bundle's job record says queued for a job that
// ran), on every retry.
func TestAttackAdmitRunsForADoneKeyWhenThePeekFails(t *testing.T) {
	for _, lease := range []bool{true, false} {
		t.Run(fmt.Sprint("lease ", lease), func(t *testing.T) {
			k := shipKind
			k.Lease = lease
			var mu sync.Mutex
			admitted := 0
			k.Admit = func(context.Context, engine.Job[order]) error { mu.Lock(); admitted++; mu.Unlock(); return nil }
			w := newWorld(t, k, nil)
			mem := w.store.Store
			if _, err := mem.Claim(context.Background(), engine.Key{Type: k.Name, JobID: "o-1"}, engine.Mark{}); err != nil {
				t.Fatal(err)
			}
			h, err := engine.NewHandler(k, w.work, engine.Options{Store: peekDown{mem}, Logger: slog.New(slog.DiscardHandler), Now: w.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			w.h = h
			w.handle(record(orderBody("o-1", 12), 2))
			if admitted != 0 || w.runs("o-1") != 0 {
				t.Fatalf("Admit ran %d times, work %d, for a key that is done; want neither", admitted, w.runs("o-1"))
			}
		})
	}
}

// recorder is a JobRecorder that remembers what it was told.
type recorder struct {
	mu     sync.Mutex
	failed map[string]engine.Failure
}

func (r *recorder) MarkParked(context.Context, string) (bool, error) { return false, nil }
func (r *recorder) MarkFailed(_ context.Context, key string, f engine.Failure) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = map[string]engine.Failure{}
	}
	r.failed[key] = f
	return nil
}
func (r *recorder) RecordOutcome(context.Context, string, string, string) error { return nil }
func (r *recorder) MarkUnclaimed(context.Context, string, string) error         { return nil }

func (r *recorder) failedOf(key string) (engine.Failure, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failed[key]
	return f, ok
}

// A FIFO record whose switch is off is held in its group (never re-sent)
// and comes back after the park delay, spending a receive each time. At
// its final receive it is reported failed like any retry, and SQS's
// redrive policy moves it to the DLQ: a kind switched off for longer than
// maxReceiveCount park delays (5 × 15 min) sends every FIFO job it holds
// to the DLQ with no reason and no Failed mark, though "Park: nothing is
// lost" and nothing failed. (A FIFO or Parker-less snooze is the same: it
// "never spends a receive", yet five snoozes dead-letter it.) The engine
// knows it is the final receive: it must at least dead-letter it with a
// reason (or record it), never leave it to the redrive silently.
func TestAttackFIFOSwitchedOffPastMaxReceiveCountIsDeadLetteredSilently(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	w.switches.Set("orders.ship", false)
	msg := fifo(orderBody("o-1", 12), "A")
	msg.Attributes["ApproximateReceiveCount"] = fmt.Sprint(engine.DefaultMaxReceiveCount)
	// Dead-lettered with its reason here (and so not reported for a retry
	// the redrive policy would turn into a second, silent letter).
	if failed := w.handle(msg); len(failed) != 0 {
		t.Fatalf("failures %v; a record dead-lettered here is done with", failed)
	}
	if _, ok := w.queues.DeadReason(msg.MessageId); !ok {
		t.Fatal("a switched-off FIFO job at its final receive is left to the redrive policy: it reaches the DLQ with no reason, though it never failed")
	}
}

// When the batch stops waiting at the deadline, a record still running is
// abandoned and its goroutine goes on. If its work then snoozes (a FIFO
// record, or no Parker), snooze writes it.holdFor while the batch reads
// it in backOff: a data race (go test -race reports it), and the
// abandoned record's hold may or may not be applied.
func TestAttackAbandonedRecordRacesTheBackOff(t *testing.T) {
	done := make(chan struct{})
	w := newWorld(t, shipKind, nil)
	h, err := engine.NewHandler(shipKind, func(ctx context.Context, job engine.Job[order]) error {
		defer close(done)
		time.Sleep(300 * time.Millisecond) // work that ignores its context
		return engine.Snooze(time.Minute, "rate")
	}, engine.Options{Store: w.store, Backoff: noBackoff{}, DeadlineMargin: 160 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _ = h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{record(orderBody("o-1", 1), 1)}})
	<-done
	time.Sleep(50 * time.Millisecond) // the snooze after the work
}

// A traced record gives its goroutine a logger of its span; when the batch
// stops waiting at the deadline it logs about the records still running,
// and then their outcome lines, while such a goroutine may still be setting
// that logger: the batch must log them with the logger it made, never read
// the one the goroutine writes (go test -race reports it).
func TestAttackAbandonedTracedRecordRacesItsLogger(t *testing.T) {
	started, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	w := newWorld(t, shipKind, nil)
	h, err := engine.NewHandler(shipKind, func(ctx context.Context, job engine.Job[order]) error {
		defer close(finished)
		close(started)
		<-release // work that ignores its context
		job.Logger.Info("late line")
		return nil
	}, engine.Options{Store: w.store, DeadlineMargin: 160 * time.Millisecond, TracerProvider: tracenoop.NewTracerProvider(),
		Logger: engine.NewLogger(&lockedWriter{w: w.logs}, "info"), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	resp, _ := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{record(orderBody("o-1", 1), 1)}})
	<-started
	close(release)
	<-finished
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v; the abandoned record is retried", resp.BatchItemFailures)
	}
	if !strings.Contains(w.logs.String(), "record still running at the deadline") {
		t.Fatalf("no line says the record was still running:\n%s", w.logs)
	}
}

type noBackoff struct{}

func (noBackoff) ChangeVisibility(context.Context, []engine.VisibilityChange) error { return nil }

// A function under Do that panics leaves its lease in place: Do neither
// releases it (as it does on an error) nor recovers. Every later call is
// ErrInProgress (an HTTP 409 "still being processed") until the lease
// runs out (DefaultLease, 5 minutes, without WithLease) for a call that
// is not running at all.
func TestAttackDoPanicHoldsTheKey(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	func() {
		defer func() { _ = recover() }() // as net/http or lambda.Start do
		_, _ = engine.Do(ctx, w.store, "payments.charge", "k-1", func(context.Context) (charge, error) {
			var m map[string]int
			m["boom"]++ // the function's bug
			return charge{}, nil
		}, engine.WithClock(w.clock.Now))
	}()
	got, err := w.do(ctx, "k-1", 12)
	if err != nil || got.Amount != 12 || w.runs != 1 {
		t.Fatalf("the call after a panic: %+v, %v, runs %d; want fn run (nothing holds the key)", got, err, w.runs)
	}
}

// Snooze "never spends one of the job's receives, however long or often it
// waits". Without a Parker (Options.Parker is required only with a
// Switch) a snoozed record is held instead, and a hold is a retry that
// spends a receive: the fifth snooze of a job waiting for a daily quota
// is reported failed at its final receive, and SQS's redrive policy moves
// it to the DLQ with no reason and no Failed mark, though it never failed.
func TestAttackSnoozeWithoutAParkerSpendsTheFinalReceive(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	h, err := engine.NewHandler(shipKind, func(context.Context, engine.Job[order]) error {
		return engine.Snooze(10*time.Minute, "daily quota")
	}, engine.Options{Store: w.store, DeadLetterer: w.queues, Logger: slog.New(slog.DiscardHandler), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	final := record(orderBody("o-1", 12), engine.DefaultMaxReceiveCount)
	failed := w.handle(final)
	if _, dead := w.queues.DeadReason(final.MessageId); len(failed) == 1 && !dead {
		t.Fatal("a snoozed job at its final receive is left to the redrive policy: it reaches the DLQ with no reason, though it only waited")
	}
}
