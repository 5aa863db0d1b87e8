package engine

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"
)

// Defaults of Config.Backoff (docs/deploy.md, "Sending within SES's rate",
// explains the numbers): with five receives, a failing job is retried after
// 15–30 s, 1–2 min, 4–8 min and 16–32 min, so its five receives span at
// least 21 minutes instead of four visibility timeouts.
const (
	DefaultBackoffBase   = 30 * time.Second
	DefaultBackoffFactor = 4.0
	DefaultBackoffCap    = time.Hour
)

// Backoff postpones the next delivery of records SQS is to retry
// (internal/sqsqueue.Visibility): each change hides its record for its timeout
// from now, instead of the queue's fixed visibility timeout. The runner
// calls it at most once per batch, with every record of the batch that
// backs off.
type Backoff interface {
	ChangeVisibility(ctx context.Context, changes []VisibilityChange) error
}

// BackoffSchedule is how long a transient retry stays hidden: attempt n
// (the receive count) waits a random time in [d/2, d] with
// d = min(Cap, Base·Factor^(n-1)) ("equal jitter": retries of one burst
// spread out, and each still waits at least half its step). A Cap above
// MaxBackoff is MaxBackoff, and the runner shortens a record's wait further
// when less of SQS's 12 h, counted from the record's receipt, is left.
type BackoffSchedule struct {
	Base   time.Duration
	Factor float64
	Cap    time.Duration
}

// withDefaults fills the zero fields and keeps Cap within MaxBackoff (a
// Cap of SQS's 12 h itself would be refused: SQS counts its limit from the
// record's receipt, which came before the change).
func (s BackoffSchedule) withDefaults() BackoffSchedule {
	if s.Factor < 1 {
		s.Factor = DefaultBackoffFactor
	}
	s.Cap = min(positiveOr(s.Cap, DefaultBackoffCap), MaxBackoff)
	s.Base = positiveOr(s.Base, DefaultBackoffBase)
	s.Base = min(s.Base, s.Cap)
	return s
}

// Step is d for an attempt: Base·Factor^(attempt-1), at most Cap.
func (s BackoffSchedule) Step(attempt int) time.Duration {
	s = s.withDefaults()
	d := float64(s.Base) * math.Pow(s.Factor, float64(max(attempt, 1)-1))
	if d >= float64(s.Cap) {
		return s.Cap
	}
	return time.Duration(d)
}

// Delay is how long attempt's retry stays hidden: Step(attempt)/2 plus
// random(n) of the other half, where random(n) returns a value in [0, n)
// (rand.Int64N), rounded up to the whole second SQS takes.
func (s BackoffSchedule) Delay(attempt int, random func(n int64) int64) time.Duration {
	d := s.Step(attempt)
	half := d / 2
	v := half + time.Duration(random(int64(d-half)+1))
	return time.Duration(VisibilitySeconds(v)) * time.Second
}

// backsOff reports whether a record's outcome is a transient retry the
// runner postpones: a failure before the final attempt, or a busy lease.
// A permanent failure left to the redrive policy goes back at once, and a
// record interrupted by the deadline (or left without an outcome) comes
// back after the visibility timeout, which the deadline already spent.
func (m *runner) backsOff(it *item) bool {
	switch {
	case m.o.Backoff == nil, it.stream, it.out.final, IsPermanent(it.out.err):
		return false
	case ReceiveCount(it.msg) >= m.o.MaxReceiveCount:
		return false // the final attempt: its next receive is the DLQ's
	}
	return it.out.kind == kindFailed || it.out.kind == kindBusy || it.out.holdFor > 0
}

// backOff postpones every record of the batch that backs off, with one
// call under the writes' own deadline. Each wait is capped by what SQS
// still accepts for its record (visibilityLeft, counted from the record's
// receipt; the batch started at start): a record with no time left is not
// backed off. A change that failed is logged, and its record keeps its
// batch item failure and returns after the queue's visibility timeout; a
// failure of some changes (a VisibilityError) leaves the others backed
// off.
func (m *runner) backOff(ctx context.Context, base *slog.Logger, items []item, start time.Time) {
	var (
		changes []VisibilityChange
		which   []*item
	)
	now := time.Now() // the real clock, as SQS keeps the receipt's
	for i := range items {
		it := &items[i]
		if !m.backsOff(it) {
			continue
		}
		d := m.o.BackoffSchedule.Delay(ReceiveCount(it.msg), m.o.Random)
		if it.out.holdFor > 0 {
			d = it.out.holdFor // a held record waits what it was told to
		}
		if left := visibilityLeft(it.msg, start, now).Truncate(time.Second); left < d {
			if left < time.Second {
				it.logger().Warn("not backed off: SQS's 12 h from the record's receipt are spent; it comes back after the queue's visibility timeout")
				continue
			}
			d = left
		}
		changes = append(changes, VisibilityChange{Message: it.msg, Timeout: d})
		which = append(which, it)
	}
	if len(changes) == 0 {
		return
	}
	err := m.write(ctx, func(wctx context.Context) error { return m.o.Backoff.ChangeVisibility(wctx, changes) })
	failed := map[string]bool{}
	var partial *VisibilityError
	switch {
	case err == nil:
	case errors.As(err, &partial):
		for id := range partial.Failed {
			failed[id] = true
		}
		base.Warn("back-off failed for some records; those come back after the queue's visibility timeout, the others as backed off",
			keyError, Redact(err), "records", len(changes), "failed", len(partial.Failed))
	default:
		base.Warn("back-off failed; the records it names come back after the queue's visibility timeout",
			keyError, Redact(err), "records", len(changes))
		return
	}
	for i, it := range which {
		if !failed[it.msg.MessageId] {
			it.retryIn = changes[i].Timeout
		}
	}
}
