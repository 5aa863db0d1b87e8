package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// park handles a record whose switch is off: its record says Parked (and
// lives as long as it is parked), then its message is re-sent with the
// park delay. Either failing retries the record; a job cancelled meanwhile
// is skipped. A FIFO record is never re-sent (that would leave its group's
// order): it is held, and comes back after the park delay.
func (m *runner) park(ctx context.Context, it *item) outcome {
	if it.group != "" || m.o.Parker == nil {
		return m.hold(ctx, it, kindHeldOff, m.o.ParkDelay, "its kill switch is off")
	}
	if m.o.Recorder != nil {
		cancelled, err := m.o.Recorder.MarkParked(ctx, it.key.JobID)
		switch {
		case cancelled:
			return outcome{kind: kindCancelled, reason: "the job was cancelled"}
		case err != nil:
			return outcome{kind: kindFailed, reason: "its kill switch is off and its record could not be marked parked", err: err}
		}
	}
	if err := m.o.Parker.Park(ctx, it.msg, m.o.ParkDelay); err != nil {
		return outcome{kind: kindFailed, reason: "its kill switch is off and it could not be parked", err: err}
	}
	return outcome{kind: kindParked, reason: "its kill switch is off; re-sent with a delay of " + m.o.ParkDelay.String()}
}

// hold keeps a record that must wait in its queue (a FIFO record, a stream
// record, or one with no Parker): it is retried after wait, in its place.
// On its final receive, where SQS would move it to the dead-letter queue
// with no word why, it is dead-lettered with its reason instead.
func (m *runner) hold(ctx context.Context, it *item, k kind, wait time.Duration, why string) outcome {
	if !it.stream && ReceiveCount(it.msg) >= m.o.MaxReceiveCount {
		return m.deadLetter(ctx, it, Permanent(fmt.Errorf("%s through its last receive (%d): a record kept in its queue (FIFO, or no Parker) spends one each time; "+
			"raise the queue's maxReceiveCount, or redrive it once it may run", why, ReceiveCount(it.msg))))
	}
	return outcome{kind: k, reason: why + "; it stays in its queue and comes back in " + wait.String(), holdFor: wait}
}

// SkippedReason is the lastReason of a job skipped while its switch was off.
const SkippedReason = "switched off"

// skip ends a record of a Skip kind whose switch is off as a successful
// no-op: its marker is claimed (a redelivery is a duplicate), its record
// says skipped, and it is never parked: the next tick of a recurring job
// tries again.
func (m *runner) skip(ctx context.Context, it *item, owner string) outcome {
	won, err := m.claim(ctx, it, owner)
	switch {
	case errors.Is(err, ErrLeaseLost):
		return m.fail(ctx, it, ErrBusy) // a twin that ran while the switch was on holds it
	case err != nil:
		return outcome{kind: kindFailed, reason: "its kill switch is off and its skip could not be recorded", err: err}
	case !won:
		return outcome{kind: kindDuplicate, reason: "already processed"}
	}
	m.onRecord(ctx, it, slog.LevelWarn, "could not record the skip on the job", func(wctx context.Context, id string) error {
		return m.o.Recorder.RecordOutcome(wctx, id, OutcomeSkipped, SkippedReason)
	})
	return outcome{kind: kindSkipped, reason: "its kill switch is off; skipped (" + it.set.name + " skips while off)"}
}
