package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// SnoozeError is what a Handler returns when its job cannot run yet for a
// reason that passes by itself: a send rate to wait for, a quota to reset.
// The runner sends a new copy of the record's message to its queue after
// Delay, unchanged (as it parks a job whose switch is off),
// and the delivery ends without a retry: the copy's receive count starts
// again, so a wait never spends one of the job's receives, however long or
// often it waits. Create it with Snooze or SnoozeParked; match it with
// errors.As.
//
// Only an EffectThenClaim type snoozes: a ClaimThenEffect type has claimed
// its marker before its effect runs, so an effect that returns a
// SnoozeError there fails after its claim, as any other error does.
type SnoozeError struct {
	// Delay is how long the copy waits: rounded up to whole seconds, at
	// least one, at most MaxDelay.
	Delay time.Duration
	// Reason says why, free of personal data: it is logged, and recorded on
	// the job when Park is set.
	Reason string
	// Park records the job as Parked with Reason: a wait an operator should
	// see (a daily quota). Without it the job record is left as it is (a
	// wait for a send slot, seconds long).
	Park bool
}

func (e *SnoozeError) Error() string { return "snoozed for " + e.Delay.String() + ": " + e.Reason }

// Snooze reports that the job waits delay before it is looked at again,
// and why; its record is left as it is.
func Snooze(delay time.Duration, reason string) error {
	return &SnoozeError{Delay: delay, Reason: reason}
}

// SnoozeParked is Snooze for a wait an operator should see: the job's
// record says Parked, with the reason.
func SnoozeParked(delay time.Duration, reason string) error {
	return &SnoozeError{Delay: delay, Reason: reason, Park: true}
}

// OutcomeParked is the outcome a parked job's record names; a snooze that
// parks records its reason under it.
const OutcomeParked = "parked"

// snoozeDelay is the delay a snoozed copy is sent with: whole seconds,
// rounded up, between one second and MaxDelay.
func snoozeDelay(d time.Duration) time.Duration {
	d = min(max(d, time.Second), MaxDelay)
	return (d + time.Second - 1) / time.Second * time.Second
}

// asSnooze returns the SnoozeError err carries, unless err is permanent.
func asSnooze(err error) (*SnoozeError, bool) {
	if err == nil {
		return nil, false
	}
	var s *SnoozeError
	if IsPermanent(err) || !errors.As(err, &s) {
		return nil, false
	}
	return s, true
}

// snooze sends a new copy of the record's message after the snooze's delay
// and ends the record without a retry. With Park, the job's record says
// Parked with the reason first (a job cancelled meanwhile is not sent
// again). A send that fails retries the record, as a failed park does. The
// send runs under the writes' own deadline, so a snooze decided late in the
// invocation still gets out. A FIFO record (or one without a Parker) is
// held instead: retried after the delay, in its place.
func (m *runner) snooze(ctx context.Context, it *item, s *SnoozeError) outcome {
	delay := snoozeDelay(s.Delay)
	if it.group != "" || m.o.Parker == nil {
		return m.hold(ctx, it, kindHeld, delay, s.Reason)
	}
	if s.Park && m.o.Recorder != nil {
		var cancelled bool
		err := m.write(ctx, func(wctx context.Context) error {
			var err error
			cancelled, err = m.o.Recorder.MarkParked(wctx, it.key.JobID)
			return err
		})
		switch {
		case cancelled:
			return outcome{kind: kindCancelled, reason: "the job was cancelled"}
		case err != nil:
			return outcome{kind: kindFailed, reason: "it must wait (" + s.Reason + ") and its record could not be marked parked", err: err}
		}
		m.onRecord(ctx, it, slog.LevelWarn, "could not record why the job is parked", func(wctx context.Context, id string) error {
			return m.o.Recorder.RecordOutcome(wctx, id, OutcomeParked, s.Reason)
		})
	}
	err := m.write(ctx, func(wctx context.Context) error {
		return m.o.Parker.Park(wctx, it.msg, delay)
	})
	if err != nil {
		return outcome{kind: kindFailed, reason: "it must wait (" + s.Reason + ") and its copy could not be sent", err: err}
	}
	k := kindSnoozed
	if s.Park {
		k = kindParked
	}
	return outcome{kind: k, reason: s.Reason + "; re-sent with a delay of " + delay.String()}
}
