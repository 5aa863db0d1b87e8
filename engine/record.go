package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/internal/obs"
)

// process runs steps 2 to 9 for one decoded record and returns its outcome.
func (r *Runner) process(ctx context.Context, it *item, leaseUntil time.Time, owner string) outcome {
	// What the job sends (a park, a fan-out's pages) carries its trace: the
	// record's, else the trace its own span started (a tick, a copy sent
	// without a header).
	ctx = WithTraceHeader(ctx, cmp.Or(it.trace, FormatXRay(trace.SpanContextFromContext(ctx))))
	switch {
	case it.hasSeen && it.seen.Processed():
		return outcome{kind: kindDuplicate, reason: "already processed"}
	case it.hasSeen && it.seen.State == StateCancelled:
		return outcome{kind: kindCancelled, reason: "the job was cancelled"}
	case it.hasSeen && it.seen.State == StateFailed:
		return r.deadLetter(ctx, it, errAlreadyFailed)
	}
	if it.tick != nil {
		// A tick's job record is written when a worker first sees it.
		if o, done := r.recordTick(ctx, it); done {
			return o
		}
	}
	switch {
	case it.disabled && skips(it):
		// Skipping runs nothing either; its claim is conditional.
		return r.skip(ctx, it, owner)
	case it.disabled:
		// Parking runs nothing, so a failed peek does not stop it.
		return r.park(ctx, it)
	case !it.peeked && !it.typ.Lease:
		return outcome{kind: kindFailed, reason: "the marker peek failed; retried rather than run without knowing", err: errors.New("marker peek failed")}
	}
	return r.run(ctx, it, leaseUntil, owner)
}

// run takes the lease (per type) and runs the effect and the claim in the
// type's order (steps 4 to 9). It is apart from process so that each
// record's goroutine keeps a small stack.
func (r *Runner) run(ctx context.Context, it *item, leaseUntil time.Time, owner string) outcome {
	if it.typ.Lease {
		if _, err := r.cfg.Markers.Lease(ctx, it.key, owner, leaseUntil); err != nil {
			return r.leaseRefused(ctx, it, err)
		}
		r.at(StepAfterLease)
	}
	job := &Job{Envelope: it.env, Type: it.typ, Attempt: ReceiveCount(it.msg), Logger: it.log}
	if it.typ.Bias == ClaimThenEffect {
		return r.claimThenEffect(ctx, it, job, owner)
	}
	return r.effectThenClaim(ctx, it, job, owner)
}

// leaseRefused is the outcome of a record whose lease was refused: the job
// is done, cancelled or failed meanwhile, a twin holds it, or the write
// failed.
func (r *Runner) leaseRefused(ctx context.Context, it *item, err error) outcome {
	switch {
	case errors.Is(err, ErrProcessed):
		return outcome{kind: kindDuplicate, reason: "already processed"}
	case errors.Is(err, ErrCancelled):
		return outcome{kind: kindCancelled, reason: "the job was cancelled"}
	case errors.Is(err, ErrFailed):
		return r.deadLetter(ctx, it, errAlreadyFailed)
	case errors.Is(err, ErrLeaseHeld):
		return r.fail(ctx, it, ErrBusy)
	}
	return r.fail(ctx, it, err)
}

// errAlreadyFailed is the dead-letter reason of a copy of a job whose
// marker says FAILED: the job was dead-lettered (its effect failed after a
// claim-then-effect claim, or another copy failed on its final attempt), so
// it reads Failed, and only a redrive runs it again.
var errAlreadyFailed = errors.New("the job already failed and was dead-lettered; it runs again only when redriven")

// effect runs the type's handler (steps 5 and 6). A panic in it is
// recovered as a PanicError, a failure like any other: the record is
// retried, its lease released, and its neighbours never notice.
func (r *Runner) effect(ctx context.Context, it *item, job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			it.log.Error("the handler panicked", "panic", panicText(v), "stack", string(debug.Stack()))
			err = &PanicError{Value: panicText(v)}
		}
	}()
	return r.cfg.Handlers[it.typ.Name].Handle(ctx, *job)
}

// effectThenClaim runs the effect, then claims: a crash between the two
// repeats the effect on redelivery (duplicates over loss).
func (r *Runner) effectThenClaim(ctx context.Context, it *item, job *Job, owner string) outcome {
	err := r.effect(ctx, it, job)
	if s, ok := asSnooze(err); ok {
		// Nothing ran that needs a claim: the lease goes first, so the
		// copy never finds it held.
		r.release(ctx, it, owner)
		return r.snooze(ctx, it, s)
	}
	var noop *NoOpError
	if err != nil && !errors.As(err, &noop) {
		o := r.fail(ctx, it, err)
		if o.final && r.cfg.Jobs != nil {
			// The job reads Failed from now on: the marker says so too,
			// under the lease this worker holds, so a copy of the job that
			// is still in a queue is dead-lettered, never run, until a
			// redrive clears it. (Without a recorder the dlq function
			// marks both when the letter arrives.)
			r.failMarker(ctx, it, owner)
		} else {
			r.release(ctx, it, owner)
		}
		return o
	}
	r.at(StepAfterEffect)
	won, cerr := r.claim(ctx, it, owner)
	r.at(StepAfterClaim)
	switch {
	case errors.Is(cerr, ErrLeaseLost):
		// Our lease expired and a twin took over; our effect stands and the
		// twin completes the marker. Duplicates over loss.
		return outcome{kind: kindSucceeded, reason: "lease lost before the claim; the effect may have run twice", err: cerr}
	case cerr != nil:
		// Step 9: the effect ran and is not recorded. It is never re-run on
		// purpose: the record is reported done, counted and alarmed, and
		// the job record says Succeeded, since its marker cannot.
		const reason = "the effect ran but its marker could not be written; a redelivery may repeat it"
		r.recordUnclaimed(ctx, it, reason)
		return outcome{kind: kindClaimFailed, reason: reason, err: cerr}
	case !won:
		// A twin claimed first (no lease, or ours expired): the effect ran
		// twice. Duplicates over loss, counted as such.
		return outcome{kind: kindDuplicate, reason: "a twin claimed first; the effect may have run twice"}
	case noop != nil:
		r.recordNoop(ctx, it, noop.Reason)
		return outcome{kind: kindNoop, reason: noop.Reason, noopKind: noop.Kind}
	}
	return outcome{kind: kindSucceeded}
}

// claimThenEffect claims first: the effect never runs twice. An effect that
// fails after its claim is dead-lettered and its marker says FAILED until a
// redrive clears it.
func (r *Runner) claimThenEffect(ctx context.Context, it *item, job *Job, owner string) outcome {
	won, err := r.claim(ctx, it, owner)
	switch {
	case err != nil && !errors.Is(err, ErrLeaseLost):
		r.release(ctx, it, owner)
		return r.fail(ctx, it, err)
	case !won || err != nil:
		return outcome{kind: kindDuplicate, reason: "already claimed"}
	}
	r.at(StepAfterClaim)
	err = r.effect(ctx, it, job)
	r.at(StepAfterEffect)
	var noop *NoOpError
	switch {
	case errors.As(err, &noop):
		r.recordNoop(ctx, it, noop.Reason)
		return outcome{kind: kindNoop, reason: noop.Reason, noopKind: noop.Kind}
	case err != nil:
		// Claimed first, so a retry would skip it: the job goes to the DLQ
		// and reads Failed; only a redrive runs it again.
		r.failMarker(ctx, it, owner)
		return r.deadLetter(ctx, it, fmt.Errorf("effect failed after its claim (claim-then-effect): %w", err))
	}
	return outcome{kind: kindSucceeded}
}

// failMarker turns owner's lease or claim of the record's marker into
// FAILED (best effort: the dead letter and the job record say why either
// way).
func (r *Runner) failMarker(ctx context.Context, it *item, owner string) {
	if !it.typ.Lease && it.typ.Bias != ClaimThenEffect {
		owner = "" // no lease was taken: fail a marker that is absent
	}
	if err := r.write(ctx, func(wctx context.Context) error { return r.cfg.Markers.Fail(wctx, it.key, owner, it.env.RunAt) }); err != nil {
		it.log.Error("could not mark the marker FAILED; the dead letter says why", obs.KeyError, obs.Redact(err))
	}
}

// claim runs step 7: the conditional put of the marker, under a context
// cancellation cannot stop (the effect has happened) with its own short
// deadline, tried up to ClaimAttempts times.
func (r *Runner) claim(ctx context.Context, it *item, owner string) (bool, error) {
	var (
		won bool
		err error
	)
	for attempt := range r.cfg.ClaimAttempts {
		if attempt > 0 {
			pause := time.Duration(attempt*attempt) * 50 * time.Millisecond
			if stop, ok := writeStop(ctx); ok && time.Until(stop) <= pause {
				break // no time left for another try before the response
			}
			time.Sleep(pause)
		}
		err = r.write(ctx, func(wctx context.Context) error {
			var cerr error
			won, cerr = r.cfg.Markers.Claim(wctx, it.key, owner, it.env.RunAt)
			return cerr
		})
		if err == nil || errors.Is(err, ErrLeaseLost) {
			return won, err
		}
		it.log.Warn("claim failed; trying again", obs.KeyError, obs.Redact(err), "claimAttempt", attempt+1)
	}
	return false, err
}

// write runs one write under a context cancellation cannot stop, with its
// own deadline (WriteTimeout), and never past the invocation's write stop
// (the real deadline less a share of the margin): a hung or throttled call
// cannot hold the batch response past the Lambda deadline.
func (r *Runner) write(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(r.cfg.WriteTimeout) // the real clock, as contexts keep it
	if stop, ok := writeStop(ctx); ok && stop.Before(deadline) {
		deadline = stop
	}
	// One context, cut from the invocation's cancellation, with the earlier
	// of the two deadlines.
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	return f(wctx)
}

func (r *Runner) release(ctx context.Context, it *item, owner string) {
	if !it.typ.Lease {
		return
	}
	if err := r.write(ctx, func(wctx context.Context) error { return r.cfg.Markers.Release(wctx, it.key, owner) }); err != nil {
		it.log.Warn("lease release failed; it expires by itself", obs.KeyError, obs.Redact(err))
	}
}

// park runs step 2 for a disabled job: its record says Parked (and lives as
// long as it is parked), then its message is re-sent with the park delay.
// Either failing retries the record; a job cancelled meanwhile is skipped.
func (r *Runner) park(ctx context.Context, it *item) outcome {
	if r.cfg.Jobs != nil {
		cancelled, err := r.cfg.Jobs.MarkParked(ctx, it.env.MessageID)
		switch {
		case cancelled:
			return outcome{kind: kindCancelled, reason: "the job was cancelled"}
		case err != nil:
			return outcome{kind: kindFailed, reason: "its kill switch is off and its record could not be marked parked", err: err}
		}
	}
	if err := r.cfg.Parker.Park(ctx, it.typ.Queue, it.env, it.msg.Body, r.cfg.ParkDelay); err != nil {
		return outcome{kind: kindFailed, reason: "its kill switch is off and it could not be parked", err: err}
	}
	return outcome{kind: kindParked, reason: "its kill switch is off; re-sent with a delay of " + r.cfg.ParkDelay.String()}
}

// skips reports whether a record whose switch is off is skipped rather
// than parked. Only a tick skips: the next tick of its schedule tries again.
// Any other job of a tick type (a page a fan-out enqueued, a copy sent as
// an envelope) carries work a tick already started, so it parks like any
// job and runs when the switch is on again; skipping it would end that
// work for good. A Skip type that no schedule ticks skips every job.
func skips(it *item) bool {
	return it.typ.WhileOff == Skip && (it.tick != nil || it.typ.TickArgs == nil)
}

// SkippedReason is the lastReason of a job skipped while its switch was off.
const SkippedReason = "switched off"

// skip ends a tick (or a job of a Skip type no schedule ticks) whose switch
// is off as a successful no-op: its marker is claimed (the job reads
// Succeeded, and a redelivery is a duplicate), its record says skipped, and
// it is never parked: the next tick of a recurring job tries again.
func (r *Runner) skip(ctx context.Context, it *item, owner string) outcome {
	won, err := r.claim(ctx, it, owner)
	switch {
	case errors.Is(err, ErrLeaseLost):
		return r.fail(ctx, it, ErrBusy) // a twin that ran while the switch was on holds it
	case err != nil:
		return outcome{kind: kindFailed, reason: "its kill switch is off and its skip could not be recorded", err: err}
	case !won:
		return outcome{kind: kindDuplicate, reason: "already processed"}
	}
	r.onRecord(ctx, it, slog.LevelWarn, "could not record the skip on the job", func(wctx context.Context, id string) error {
		return r.cfg.Jobs.RecordOutcome(wctx, id, OutcomeSkipped, SkippedReason)
	})
	return outcome{kind: kindSkipped, reason: "its kill switch is off; skipped (" + it.typ.Name + " skips while off)"}
}

// recordTick writes the job record of a tick when it is new (Reserve, then
// Promote: the message is in its queue, this worker holds it) and decides
// whether the record goes on: it stops, done, when another job holds the
// tick's key, when the key is busy, or when the record cannot be written
// (retried).
func (r *Runner) recordTick(ctx context.Context, it *item) (outcome, bool) {
	if r.cfg.Ticks == nil {
		return outcome{}, false
	}
	now := r.cfg.Now().UTC()
	job := TickJob{
		ID: it.env.MessageID, Caller: TickCaller(it.tick.Schedule), Type: it.env.Type, Key: it.env.Key,
		Queue: string(it.typ.Queue), CorrelationID: it.env.CorrelationID, TraceID: cmp.Or(obs.TraceRoot(it.trace), spanTraceID(ctx)),
		Message: it.encoded, At: now,
	}
	d, err := r.cfg.Ticks.RecordTick(ctx, job)
	switch {
	case err != nil:
		return outcome{kind: kindFailed, reason: "the tick's job record could not be written", err: err}, true
	case d.Busy:
		return outcome{kind: kindBusy, reason: "another tick is creating the job of this key", err: ErrBusy}, true
	case !d.Own:
		// Another tick of the same key (another scheduled time) holds it:
		// that job does the work.
		return outcome{kind: kindDuplicate, reason: "job " + d.HolderID + " holds the tick's key " + it.env.Key}, true
	case d.Recorded:
		it.log.Info("tick: job recorded", "schedule", it.tick.Schedule, "scheduledTime", it.tick.ScheduledTime)
	}
	return outcome{}, false
}

// recordUnclaimed marks the job Succeeded after its claim failed (best
// effort: when the record cannot be written either, the job reads as its
// marker and record say, and the ClaimFailed alarm tells why).
func (r *Runner) recordUnclaimed(ctx context.Context, it *item, reason string) {
	r.onRecord(ctx, it, slog.LevelWarn, "could not mark the job succeeded after its claim failed", func(wctx context.Context, id string) error {
		return r.cfg.Jobs.MarkUnclaimed(wctx, id, reason)
	})
}

// recordNoop records why a job needed no work on its record (best effort:
// the job succeeded either way).
func (r *Runner) recordNoop(ctx context.Context, it *item, reason string) {
	r.onRecord(ctx, it, slog.LevelWarn, "could not record the no-op reason on the job", func(wctx context.Context, id string) error {
		return r.cfg.Jobs.RecordOutcome(wctx, id, OutcomeNoop, reason)
	})
}

// onRecord writes what the runner learnt onto the job record, when there is
// a recorder, under the writes' own deadline (see write). It is best effort:
// a job without a record is fine, and any other failure is logged at level
// with msg, never the record's outcome.
func (r *Runner) onRecord(ctx context.Context, it *item, level slog.Level, msg string, write func(wctx context.Context, jobID string) error) {
	if r.cfg.Jobs == nil {
		return
	}
	err := r.write(ctx, func(wctx context.Context) error { return write(wctx, it.env.MessageID) })
	if err != nil {
		it.log.Log(ctx, level, msg, obs.KeyError, obs.Redact(err))
	}
}

// fail decides the fate of a failed record (step 8).
func (r *Runner) fail(ctx context.Context, it *item, err error) outcome {
	switch {
	case IsPermanent(err):
		return r.deadLetter(ctx, it, err)
	case isCancellation(ctx, err):
		return outcome{kind: kindInterrupted, reason: "interrupted by the invocation's deadline", err: err}
	case errors.Is(err, ErrBusy):
		return outcome{kind: kindBusy, reason: "a concurrent twin holds the lease", err: err}
	}
	attempt := ReceiveCount(it.msg)
	if attempt < r.cfg.MaxReceiveCount {
		return outcome{kind: kindFailed, reason: fmt.Sprintf("attempt %d of %d failed; SQS retries it", attempt, r.cfg.MaxReceiveCount), err: err}
	}
	reason := fmt.Sprintf("failed on its final attempt (%d): %s", attempt, obs.Redact(err))
	r.onRecord(ctx, it, slog.LevelError, "could not mark the job Failed", func(wctx context.Context, id string) error {
		return r.cfg.Jobs.MarkFailed(wctx, id, Failure{Class: ErrorClass(err), Reason: reason, Attempts: attempt, Due: it.env.RunAt})
	})
	return outcome{kind: kindFailed, final: true, reason: reason + "; the queue moves it to the dead-letter queue", err: err}
}

// deadLetter sends a record that can never succeed to the DLQ with its
// reason: the error's text with every provider message redacted. If that
// send fails the record is retried, never dropped.
func (r *Runner) deadLetter(ctx context.Context, it *item, cause error) outcome {
	reason := obs.Redact(cause)
	if r.cfg.DeadLetterer == nil {
		return outcome{kind: kindFailed, reason: "failed permanently; left to the queue's redrive policy: " + reason, err: cause}
	}
	err := r.write(ctx, func(wctx context.Context) error { return r.cfg.DeadLetterer.DeadLetter(wctx, it.msg, reason) })
	if err != nil {
		return outcome{kind: kindFailed, reason: "failed permanently and could not be dead-lettered: " + reason, err: err}
	}
	return outcome{kind: kindDeadLettered, reason: reason, err: cause}
}
