package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// process runs the steps after the batch's peek for one decoded record and
// returns its outcome.
func (m *runner) process(ctx context.Context, it *item, leaseUntil time.Time, owner string) outcome {
	// What the job sends (a park, a fan-out's pages) carries its trace: the
	// record's, else the trace its own span started.
	switch {
	case it.sends != "": // a traced record's span set it
	case it.trace != "":
		it.sends = it.trace
	default:
		it.sends = FormatXRay(trace.SpanContextFromContext(ctx))
	}
	if it.sends != "" {
		ctx = context.WithValue(ctx, traceKey{}, &it.sends)
	}
	switch {
	case it.hasSeen && m.otherContent(it, it.seen):
		return m.deadLetter(ctx, it, fingerprintMismatch(it))
	case it.hasSeen && it.seen.Processed():
		return outcome{kind: kindDuplicate, reason: "already processed"}
	case it.hasSeen && it.seen.State == StateCancelled:
		return outcome{kind: kindCancelled, reason: "the job was cancelled"}
	case it.hasSeen && it.seen.State == StateFailed:
		return m.deadLetter(ctx, it, errAlreadyFailed)
	}
	if it.admits && !it.peeked {
		// Admit runs for a key known not to be done; with the peek failed
		// nothing is known yet.
		return outcome{kind: kindFailed, reason: "the marker peek failed; retried rather than admitted without knowing", err: errors.New("marker peek failed")}
	}
	if it.admits {
		if o, done := m.admitted(ctx, it); done {
			return o
		}
	}
	switch {
	case it.disabled && it.set.whileOff == Skip:
		// Skipping runs nothing either; its claim is conditional.
		return m.skip(ctx, it, owner)
	case it.disabled:
		// Parking runs nothing, so a failed peek does not stop it.
		return m.park(ctx, it)
	case !it.peeked && !it.set.lease:
		return outcome{kind: kindFailed, reason: "the marker peek failed; retried rather than run without knowing", err: errors.New("marker peek failed")}
	}
	return m.run(ctx, it, leaseUntil, owner)
}

// otherContent reports whether r, the marker of the record's key, is done
// or held under another fingerprint than the record's payload.
func (m *runner) otherContent(it *item, r Record) bool {
	return it.fp != "" && r.Fingerprint != "" && r.Fingerprint != it.fp && (r.Processed() || r.LeaseActive(m.o.Now()))
}

func fingerprintMismatch(it *item) error {
	return Permanent(fmt.Errorf("%w: key %q of %s", ErrFingerprint, it.key.JobID, it.key.Type))
}

// admitted runs the kind's Admit and decides the record when it says so.
func (m *runner) admitted(ctx context.Context, it *item) (outcome, bool) {
	err := it.jobs.admit(ctx, it.i, ReceiveCount(it.msg), it.log)
	switch {
	case err == nil:
		return outcome{}, false
	case errors.Is(err, ErrProcessed):
		return outcome{kind: kindDuplicate, reason: err.Error()}, true
	case errors.Is(err, ErrBusy):
		return outcome{kind: kindBusy, reason: err.Error(), err: err}, true
	}
	return m.fail(ctx, it, err), true
}

// run takes the lease (per kind) and runs the work and the claim in the
// kind's order. It is apart from process so that each record's goroutine
// keeps a small stack.
func (m *runner) run(ctx context.Context, it *item, leaseUntil time.Time, owner string) outcome {
	if it.set.lease {
		if old, err := m.o.Store.Lease(ctx, it.key, Mark{Owner: owner, Until: leaseUntil, Expires: m.expires(it), Fingerprint: it.fp}); err != nil {
			if m.otherContent(it, old) {
				return m.deadLetter(ctx, it, fingerprintMismatch(it))
			}
			return m.leaseRefused(ctx, it, err)
		}
		m.at(StepAfterLease)
	}
	if it.set.bias == ClaimThenEffect {
		return m.claimThenEffect(ctx, it, owner)
	}
	return m.effectThenClaim(ctx, it, owner)
}

// leaseRefused is the outcome of a record whose lease was refused: the job
// is done, cancelled or failed meanwhile, a twin holds it, or the write
// failed.
func (m *runner) leaseRefused(ctx context.Context, it *item, err error) outcome {
	switch {
	case errors.Is(err, ErrProcessed):
		return outcome{kind: kindDuplicate, reason: "already processed"}
	case errors.Is(err, ErrCancelled):
		return outcome{kind: kindCancelled, reason: "the job was cancelled"}
	case errors.Is(err, ErrFailed):
		return m.deadLetter(ctx, it, errAlreadyFailed)
	case errors.Is(err, ErrLeaseHeld):
		return m.fail(ctx, it, ErrBusy)
	}
	return m.fail(ctx, it, err)
}

// errAlreadyFailed is the dead-letter reason of a copy of a job whose
// marker says FAILED: the job was dead-lettered (its effect failed after a
// claim-then-effect claim, or another copy failed on its final attempt), so
// it reads Failed, and only a redrive runs it again.
var errAlreadyFailed = errors.New("the job already failed and was dead-lettered; it runs again only when redriven")

// effect runs the kind's work. A panic in it is recovered as a PanicError,
// a failure like any other: the record is retried, its lease released, and
// its neighbours never notice.
func (m *runner) effect(ctx context.Context, it *item) (err error) {
	defer func() {
		if v := recover(); v != nil {
			it.log.Error("the work panicked", "panic", panicText(v), "stack", string(debug.Stack()))
			err = &PanicError{Value: panicText(v)}
		}
	}()
	return it.jobs.run(ctx, it.i, ReceiveCount(it.msg), it.log)
}

// effectThenClaim runs the effect, then claims: a crash between the two
// repeats the effect on redelivery (duplicates over loss).
func (m *runner) effectThenClaim(ctx context.Context, it *item, owner string) outcome {
	err := m.effect(ctx, it)
	if s, ok := asSnooze(err); ok {
		// Nothing ran that needs a claim: the lease goes first, so the
		// copy never finds it held.
		m.release(ctx, it, owner)
		return m.snooze(ctx, it, s)
	}
	noop, isNoop := noOpOf(err)
	if err != nil && !isNoop {
		o := m.fail(ctx, it, err)
		if o.final && m.o.Recorder != nil {
			// The job reads Failed from now on: the marker says so too,
			// under the lease this worker holds, so a copy of the job that
			// is still in a queue is dead-lettered, never run, until a
			// redrive clears it. (Without a recorder the application marks
			// both when the letter arrives.)
			m.failMarker(ctx, it, owner)
		} else {
			m.release(ctx, it, owner)
		}
		return o
	}
	m.at(StepAfterEffect)
	won, cerr := m.claim(ctx, it, owner)
	m.at(StepAfterClaim)
	switch {
	case errors.Is(cerr, ErrLeaseLost):
		// Our lease expired and a twin took over; our effect stands and the
		// twin completes the marker. Duplicates over loss.
		return outcome{kind: kindSucceeded, reason: "lease lost before the claim; the effect may have run twice", err: cerr}
	case cerr != nil:
		// The effect ran and is not recorded. It is never re-run on
		// purpose: the record is reported done, counted and alarmed, and
		// the job record says Succeeded, since its marker cannot.
		const reason = "the effect ran but its marker could not be written; a redelivery may repeat it"
		m.recordUnclaimed(ctx, it, reason)
		return outcome{kind: kindClaimFailed, reason: reason, err: cerr}
	case !won:
		// A twin claimed first (no lease, or ours expired): the effect ran
		// twice. Duplicates over loss, counted as such.
		return outcome{kind: kindDuplicate, reason: "a twin claimed first; the effect may have run twice"}
	case isNoop:
		m.recordNoop(ctx, it, noop.Reason)
		return outcome{kind: kindNoop, reason: noop.Reason, noopKind: noop.Kind}
	}
	return outcome{kind: kindSucceeded}
}

// claimThenEffect claims first: the effect never runs twice. An effect that
// fails after its claim is dead-lettered and its marker says FAILED until a
// redrive clears it.
func (m *runner) claimThenEffect(ctx context.Context, it *item, owner string) outcome {
	won, err := m.claim(ctx, it, owner)
	switch {
	case err != nil && !errors.Is(err, ErrLeaseLost):
		m.release(ctx, it, owner)
		return m.fail(ctx, it, err)
	case !won || err != nil:
		return outcome{kind: kindDuplicate, reason: "already claimed"}
	}
	m.at(StepAfterClaim)
	err = m.effect(ctx, it)
	m.at(StepAfterEffect)
	if err == nil || isNoOp(err) {
		m.remember(it.key, it.fp, m.expires(it))
	}
	noop, isNoop := noOpOf(err)
	switch {
	case isNoop:
		m.recordNoop(ctx, it, noop.Reason)
		return outcome{kind: kindNoop, reason: noop.Reason, noopKind: noop.Kind}
	case err != nil:
		// Claimed first, so a retry would skip it: the job goes to the DLQ
		// and reads Failed; only a redrive runs it again.
		m.failMarker(ctx, it, owner)
		return m.deadLetter(ctx, it, fmt.Errorf("effect failed after its claim (claim-then-effect): %w", err))
	}
	return outcome{kind: kindSucceeded}
}

// failMarker turns owner's lease or claim of the record's marker into
// FAILED, tried up to ClaimAttempts times as a claim is (a throttled write
// must not leave a claim-then-effect job's marker DONE: a redrive, which
// clears FAILED markers, would find it done). When it still fails the dead
// letter and the job record say why; under claim-then-effect that is the
// loss its bias chooses over a repeat, as a crash after the claim would be.
func (m *runner) failMarker(ctx context.Context, it *item, owner string) {
	if !it.set.lease && it.set.bias != ClaimThenEffect {
		owner = "" // no lease was taken: fail a marker that is absent
	}
	m.forget(it.key)
	mark := Mark{Owner: owner, Expires: m.expires(it), Fingerprint: it.fp}
	var err error
	for attempt := range m.o.ClaimAttempts {
		if attempt > 0 && !m.pause(ctx, attempt) {
			break
		}
		if err = m.write(ctx, func(wctx context.Context) error { return m.o.Store.Fail(wctx, it.key, mark) }); err == nil {
			return
		}
	}
	it.log.Error("could not mark the marker FAILED; the dead letter says why", keyError, Redact(err))
}

// pause waits before write attempt n (1, 2, …) of a retried write, and
// reports false when no time is left for it before the invocation's write
// stop.
func (m *runner) pause(ctx context.Context, n int) bool {
	pause := time.Duration(n*n) * 50 * time.Millisecond
	if stop, ok := writeStop(ctx); ok && time.Until(stop) <= pause {
		return false
	}
	time.Sleep(pause)
	return true
}

// claim writes the done marker under a context cancellation cannot stop
// (the effect has happened) with its own short deadline, tried up to
// ClaimAttempts times.
func (m *runner) claim(ctx context.Context, it *item, owner string) (bool, error) {
	var (
		won bool
		err error
	)
	mark := Mark{Owner: owner, Expires: m.expires(it), Fingerprint: it.fp}
	for attempt := range m.o.ClaimAttempts {
		if attempt > 0 && !m.pause(ctx, attempt) {
			break // no time left for another try before the response
		}
		err = m.write(ctx, func(wctx context.Context) error {
			var cerr error
			won, cerr = m.o.Store.Claim(wctx, it.key, mark)
			return cerr
		})
		if err == nil || errors.Is(err, ErrLeaseLost) {
			if err == nil && won && it.set.bias != ClaimThenEffect {
				// A claim-then-effect key is done once its effect is:
				// claimThenEffect remembers it then.
				m.remember(it.key, it.fp, mark.Expires)
			}
			return won, err
		}
		it.log.Warn("claim failed; trying again", keyError, Redact(err), "claimAttempt", attempt+1)
	}
	return false, err
}

// write runs one write under a context cancellation cannot stop, with its
// own deadline (WriteTimeout), and never past the invocation's write stop
// (the real deadline less a share of the margin): a hung or throttled call
// cannot hold the batch response past the Lambda deadline.
func (m *runner) write(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(m.o.WriteTimeout) // the real clock, as contexts keep it
	if stop, ok := writeStop(ctx); ok && stop.Before(deadline) {
		deadline = stop
	}
	// One context, cut from the invocation's cancellation, with the earlier
	// of the two deadlines.
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	return f(wctx)
}

func (m *runner) release(ctx context.Context, it *item, owner string) {
	if !it.set.lease {
		return
	}
	if err := m.write(ctx, func(wctx context.Context) error { return m.o.Store.Release(wctx, it.key, owner) }); err != nil {
		it.log.Warn("lease release failed; it expires by itself", keyError, Redact(err))
	}
}

// recordUnclaimed marks the job Succeeded after its claim failed (best
// effort: when the record cannot be written either, the job reads as its
// marker and record say, and the ClaimFailed alarm tells why).
func (m *runner) recordUnclaimed(ctx context.Context, it *item, reason string) {
	m.onRecord(ctx, it, slog.LevelWarn, "could not mark the job succeeded after its claim failed", func(wctx context.Context, id string) error {
		return m.o.Recorder.MarkUnclaimed(wctx, id, reason)
	})
}

// recordNoop records why a job needed no work on its record (best effort:
// the job succeeded either way).
func (m *runner) recordNoop(ctx context.Context, it *item, reason string) {
	m.onRecord(ctx, it, slog.LevelWarn, "could not record the no-op reason on the job", func(wctx context.Context, id string) error {
		return m.o.Recorder.RecordOutcome(wctx, id, OutcomeNoop, reason)
	})
}

// onRecord writes what the runner learnt onto the job record, when there is
// a recorder, under the writes' own deadline (see write). It is best effort:
// a job without a record is fine, and any other failure is logged at level
// with msg, never the record's outcome.
func (m *runner) onRecord(ctx context.Context, it *item, level slog.Level, msg string, write func(wctx context.Context, key string) error) {
	if m.o.Recorder == nil {
		return
	}
	err := m.write(ctx, func(wctx context.Context) error { return write(wctx, it.key.JobID) })
	if err != nil {
		it.log.Log(ctx, level, msg, keyError, Redact(err))
	}
}

// fail decides the outcome of a record whose work returned err: dead-lettered
// (permanent), retried, or, on its final attempt, the job marked Failed.
func (m *runner) fail(ctx context.Context, it *item, err error) outcome {
	switch {
	case IsPermanent(err):
		return m.deadLetter(ctx, it, err)
	case isCancellation(ctx, err):
		// A deadline is a retry, never a failure, even on the final receive:
		// the dead-letter queue's consumer records a job SQS moves there.
		return outcome{kind: kindInterrupted, reason: "interrupted by the invocation's deadline", err: err}
	case errors.Is(err, ErrBusy):
		return outcome{kind: kindBusy, reason: "a concurrent twin holds the lease", err: err}
	}
	attempt := ReceiveCount(it.msg)
	if it.stream {
		// A stream says nothing of its retries: the event source mapping's
		// MaximumRetryAttempts and its on-failure destination end them.
		return outcome{kind: kindFailed, reason: "failed; the stream retries its shard from it", err: err}
	}
	if attempt < m.o.MaxReceiveCount {
		return outcome{kind: kindFailed, reason: fmt.Sprintf("attempt %d of %d failed; SQS retries it", attempt, m.o.MaxReceiveCount), err: err}
	}
	reason := fmt.Sprintf("failed on its final attempt (%d): %s", attempt, Redact(err))
	m.onRecord(ctx, it, slog.LevelError, "could not mark the job Failed", func(wctx context.Context, id string) error {
		return m.o.Recorder.MarkFailed(wctx, id, Failure{Class: ErrorClass(err), Reason: reason, Attempts: attempt, Due: it.due})
	})
	return outcome{kind: kindFailed, final: true, reason: reason + "; the queue moves it to the dead-letter queue", err: err}
}

// deadLetter sends a record that can never succeed to the DLQ with its
// reason: the error's text with every provider message redacted. If that
// send fails the record is retried, never dropped.
func (m *runner) deadLetter(ctx context.Context, it *item, cause error) outcome {
	reason := Redact(cause)
	if m.o.DeadLetterer == nil {
		return outcome{kind: kindFailed, reason: "failed permanently; left to the queue's redrive policy: " + reason, err: cause}
	}
	err := m.write(ctx, func(wctx context.Context) error { return m.o.DeadLetterer.DeadLetter(wctx, it.msg, reason) })
	if err != nil {
		return outcome{kind: kindFailed, reason: "failed permanently and could not be dead-lettered: " + reason, err: err}
	}
	return outcome{kind: kindDeadLettered, reason: reason, err: cause}
}

// noOpOf returns the NoOpError err carries (nil and false for none, or a
// nil err: the common case reads nothing and allocates nothing).
func noOpOf(err error) (*NoOpError, bool) {
	if err == nil {
		return nil, false
	}
	var n *NoOpError
	if errors.As(err, &n) {
		return n, true
	}
	return nil, false
}

// isNoOp reports whether err is a NoOpError.
func isNoOp(err error) bool { _, ok := noOpOf(err); return ok }
