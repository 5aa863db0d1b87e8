package engine

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// kind is what became of one record. Every record ends with exactly one,
// and finish turns it into one log line, its metrics, and (for the retry
// kinds) a batch item failure.
type kind int

const (
	kindPending kind = iota
	// kindSucceeded: the effect ran and the marker is claimed.
	kindSucceeded
	// kindNoop: the handler found no work to do (NoOp); the marker is
	// claimed and the reason recorded on the job.
	kindNoop
	// kindDuplicate: already processed (by an earlier delivery or a twin).
	kindDuplicate
	// kindParked: the kill switch is off; re-sent with a delay.
	kindParked
	// kindSnoozed: the handler must wait (a send rate): a copy is re-sent
	// with a delay, so the wait spends no receive.
	kindSnoozed
	// kindSkipped: the kill switch is off and the type skips while off:
	// the marker is claimed, the job record says skipped; never parked.
	kindSkipped
	// kindCancelled: the job was cancelled; skipped.
	kindCancelled
	// kindDeadLettered: sent to the DLQ with its reason (never retried).
	kindDeadLettered
	// kindFailed: the work returned an error; the record is retried (on the
	// final attempt the job was marked Failed and the queue moves the record
	// to the DLQ).
	kindFailed
	// kindBusy: a concurrent twin holds the lease; retried later.
	kindBusy
	// kindInterrupted: the invocation's deadline came first; retried.
	kindInterrupted
	// kindHeld: a FIFO record behind a retried one of its group, or a
	// record that must wait and cannot be re-sent (a FIFO record, or no
	// Parker): retried, never run now.
	kindHeld
	// kindHeldOff: like kindHeld, for a record whose switch is off.
	kindHeldOff
	// kindClaimFailed: the effect ran but its marker could not be written
	// even after retries: reported done (an effect is never re-run on
	// purpose), logged and counted.
	kindClaimFailed
)

// outcomes is the one table of what each kind means outside: its name in
// the log, its level, the metrics it counts, whether SQS retries it, and
// whether it ends the job for good (its errorClass is then a permanent
// class: PermanentClass).
var outcomes = map[kind]struct {
	name    string
	level   slog.Level
	metrics []string
	retry   bool
	final   bool
}{
	// A record that ended without an outcome (its goroutine died) is
	// retried, never deleted.
	kindPending:      {"retry", slog.LevelError, nil, true, false},
	kindSucceeded:    {"succeeded", slog.LevelInfo, []string{JobsSucceeded}, false, false},
	kindNoop:         {"noop", slog.LevelInfo, []string{JobsSucceeded, JobsSkipped}, false, false},
	kindDuplicate:    {"duplicate", slog.LevelInfo, []string{JobsDuplicate}, false, false},
	kindParked:       {"parked", slog.LevelWarn, []string{JobsSkipped, JobsParked}, false, false},
	kindSnoozed:      {"snoozed", slog.LevelInfo, []string{JobsSnoozed}, false, false},
	kindSkipped:      {"skipped", slog.LevelInfo, []string{JobsSucceeded, JobsSkipped}, false, false},
	kindCancelled:    {"cancelled", slog.LevelInfo, []string{JobsSkipped}, false, false},
	kindDeadLettered: {"dead-lettered", slog.LevelError, []string{JobsFailed}, false, true},
	kindFailed:       {"retry", slog.LevelWarn, []string{JobsFailed}, true, false},
	kindBusy:         {"retry", slog.LevelInfo, nil, true, false},
	kindInterrupted:  {"retry", slog.LevelWarn, nil, true, false},
	kindHeld:         {"retry", slog.LevelInfo, nil, true, false},
	kindHeldOff:      {"retry", slog.LevelWarn, []string{JobsSkipped}, true, false},
	kindClaimFailed:  {"claim-failed", slog.LevelError, []string{JobsSucceeded, ClaimFailed}, false, false},
}

// outcome is what became of a record, with why.
type outcome struct {
	kind   kind
	reason string
	err    error
	// final marks a failure on the final attempt (the job reads Failed).
	final bool
	// noopKind is a no-op's kind of reason (NoOpKind), counted by JobsNoop.
	noopKind string
	// holdFor is how long a held record (kept in its queue: a FIFO one, or
	// one without a Parker) waits before it comes back (0: the back-off's
	// schedule). It is part of the outcome so that an abandoned record's
	// late decision is dropped with the rest of it.
	holdFor time.Duration
}

// finish writes the record's one outcome line and its metrics, and reports
// whether the record is retried (a batch item failure). It is the only place that
// counts job metrics.
func (m *runner) finish(ctx context.Context, it *item) (retry bool) {
	o := outcomes[it.out.kind]
	name, level := o.name, o.level
	if it.out.final {
		name, level = "failed", slog.LevelError
	}
	attrs := []slog.Attr{slog.String(keyOutcome, name), slog.Int("attempt", ReceiveCount(it.msg))}
	if it.out.reason != "" {
		attrs = append(attrs, slog.String(keyReason, it.out.reason))
	}
	if it.retryIn > 0 {
		attrs = append(attrs, slog.Int("retryInSeconds", int(it.retryIn/time.Second)))
	}
	if it.out.err != nil {
		class := ErrorClass(it.out.err)
		if o.final {
			class = PermanentClass(it.out.err)
		}
		attrs = append(attrs, slog.String(keyError, Redact(it.out.err)), slog.String("errorClass", class))
	}
	it.logger().LogAttrs(ctx, level, "job outcome", attrs...)
	for _, name := range o.metrics {
		m.o.Metrics.Count(name, it.metricType(), 1)
	}
	if it.out.kind == kindNoop {
		m.o.Metrics.CountReason(JobsNoop, it.metricType(), cmp.Or(it.out.noopKind, "other"), 1)
	}
	return o.retry
}

// settles reports whether an outcome of kind k leaves its key settled for
// the rest of the batch: a later record of the key is a duplicate.
func settles(k kind) bool {
	switch k {
	case kindSucceeded, kindNoop, kindDuplicate, kindSkipped, kindCancelled, kindClaimFailed:
		return true
	}
	return false
}
