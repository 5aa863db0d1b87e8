package email

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/obs"
)

// Slots is the port to the account's one send schedule, shared by every
// invocation of every worker: slots a fixed interval apart (one over the
// SES rate), each booked by one send (package sendrate keeps it in
// DynamoDB). Its bookings bound the account's rate exactly, whatever number
// of invocations book, and a queue alone with work may book every slot.
type Slots interface {
	// Reserve books up to n consecutive slots, the first no earlier than
	// start and the last no later than latest, after every slot booked
	// before. It books fewer (none) when the schedule is full up to latest.
	Reserve(ctx context.Context, n int, start, latest time.Time) (Booking, error)
}

// Booking is what Slots.Reserve booked: Count slots, the first at First,
// Interval apart. Free is when the schedule's first free slot is now (the
// end of this booking, or of the bookings before it when none was made).
type Booking struct {
	First    time.Time
	Count    int
	Interval time.Duration
	Free     time.Time
}

// ErrDailyQuota is (wrapped in) the failure of a send SES refused because
// the account's daily sending quota (its last 24 hours) is used up.
var ErrDailyQuota = errors.New("email: SES's daily sending quota is used up")

// ErrSendingPaused is (wrapped in) the failure of a send SES refused because
// it paused the account's sending, or the configuration set's.
var ErrSendingPaused = errors.New("email: SES has paused sending")

// Defaults of Pacing.
const (
	// DefaultSendTime is kept between a send's slot and the invocation's
	// deadline for the send itself.
	DefaultSendTime = 2 * time.Second
	// DefaultHorizon bounds how far ahead a send without a deadline books.
	DefaultHorizon = 30 * time.Second
	// DefaultBookAhead is how far ahead of now the first slot of a booking
	// lies, so the booking's answer is back before its first slot.
	DefaultBookAhead = 50 * time.Millisecond
	// blockFor is how long a container parks its sends without asking SES
	// after SES refused one for its quota or a pause: then it asks again,
	// so a quota that reset is seen within a minute, not a park later.
	blockFor = time.Minute
)

// The reasons a job records when it must wait for SES.
const (
	ReasonDailyQuota = "SES's daily sending quota is used up; parked until it resets (SES counts the last 24 hours)"
	ReasonPaused     = "SES has paused sending for the account or its configuration set; parked until sending is resumed"
)

// Pacing configures Paced. Slots is required.
type Pacing struct {
	Slots Slots
	// SendTime, Horizon and BookAhead: the defaults above if 0.
	SendTime, Horizon, BookAhead time.Duration
	// QuotaWait is how long a job SES refused for its daily quota (or a
	// pause) waits before it is looked at again (engine.MaxDelay if 0).
	QuotaWait time.Duration
	// Metrics counts SesDailyQuota and SesSendingPaused (optional).
	Metrics *engine.Metrics
	// Random returns a value in [0, n): a snooze's jitter (rand.Int64N if
	// nil).
	Random func(n int64) int64
}

// Paced is a Sender that sends each mail in a slot of the account's send
// schedule (Slots). The sends of an invocation book their slots together:
// one booking, one call, for all that wait at once. A send whose slot would
// come after the invocation's deadline is not sent and spends no receive:
// it returns engine.Snooze, and its job comes back when the booked slots
// have passed. A send SES refuses for its daily quota or a pause returns
// engine.SnoozeParked, and for a minute every later send of this container
// does too without calling SES.
type Paced struct {
	next Sender
	cfg  Pacing

	mu      sync.Mutex
	queue   []*waiter
	booking bool // a booker is at work
	blocked time.Time
	reason  string
	metric  string
}

// waiter is one send waiting for its slot; ready gets its booking, or the
// turn to book for everyone waiting.
type waiter struct {
	latest time.Time
	ready  chan booked
}

type booked struct {
	slot, free time.Time
	err        error
	book       bool // this waiter books next
}

// NewPaced returns next paced by p.Slots.
func NewPaced(next Sender, p Pacing) (*Paced, error) {
	if p.Slots == nil {
		return nil, errors.New("email: Pacing needs Slots")
	}
	if p.SendTime <= 0 {
		p.SendTime = DefaultSendTime
	}
	if p.Horizon <= 0 {
		p.Horizon = DefaultHorizon
	}
	if p.BookAhead <= 0 {
		p.BookAhead = DefaultBookAhead
	}
	if p.QuotaWait <= 0 || p.QuotaWait > engine.MaxDelay {
		p.QuotaWait = engine.MaxDelay
	}
	if p.Random == nil {
		p.Random = rand.Int64N
	}
	return &Paced{next: next, cfg: p}, nil
}

// Send waits for a slot of the schedule, then sends.
func (p *Paced) Send(ctx context.Context, m Message) error {
	if err := p.whileBlocked(); err != nil {
		return err
	}
	latest := time.Now().Add(p.cfg.Horizon)
	if d, ok := ctx.Deadline(); ok {
		latest = d.Add(-p.cfg.SendTime)
	}
	b := p.reserve(ctx, latest)
	switch {
	case b.err != nil:
		return fmt.Errorf("email: book a send slot: %w", b.err)
	case b.slot.IsZero():
		wait := max(time.Until(b.free), time.Second)
		return engine.Snooze(wait+time.Duration(p.cfg.Random(int64(wait/2)+1)),
			"no send slot of the SES rate before this invocation's deadline; the booked slots end in "+wait.Round(time.Second).String())
	}
	if err := sleepUntil(ctx, b.slot); err != nil {
		return err
	}
	err := p.next.Send(ctx, m)
	switch {
	case errors.Is(err, ErrDailyQuota):
		return p.block(obs.SesDailyQuota, ReasonDailyQuota)
	case errors.Is(err, ErrSendingPaused):
		return p.block(obs.SesSendingPaused, ReasonPaused)
	}
	return err
}

// block parks this send, and every send of the container for blockFor.
func (p *Paced) block(metric, reason string) error {
	p.mu.Lock()
	p.blocked, p.reason, p.metric = time.Now().Add(min(blockFor, p.cfg.QuotaWait)), reason, metric
	p.mu.Unlock()
	p.cfg.Metrics.Count(metric, "ses", 1)
	return engine.SnoozeParked(p.cfg.QuotaWait, reason)
}

// whileBlocked parks a send while the container knows SES refuses sends.
func (p *Paced) whileBlocked() error {
	p.mu.Lock()
	blocked := time.Now().Before(p.blocked)
	reason, metric := p.reason, p.metric
	p.mu.Unlock()
	if !blocked {
		return nil
	}
	p.cfg.Metrics.Count(metric, "ses", 1)
	return engine.SnoozeParked(p.cfg.QuotaWait, reason)
}

// reserve returns this send's booking. The first send to wait books for
// every send waiting then (one call), and hands the turn to one of those
// that came meanwhile, so each booking is fresh and no send waits behind
// another's slot to book.
func (p *Paced) reserve(ctx context.Context, latest time.Time) booked {
	w := &waiter{latest: latest, ready: make(chan booked, 1)}
	p.mu.Lock()
	p.queue = append(p.queue, w)
	turn := !p.booking
	p.booking = true
	p.mu.Unlock()
	for {
		if turn {
			p.bookWaiting(ctx)
		}
		b := <-w.ready
		if !b.book {
			return b
		}
		turn = true
	}
}

// bookWaiting books one slot for each send waiting, in one Reserve, gives
// each its slot (or the time the schedule frees up, or the error), and
// passes the turn on.
func (p *Paced) bookWaiting(ctx context.Context) {
	p.mu.Lock()
	batch := p.queue
	p.queue = nil
	p.mu.Unlock()
	latest := batch[0].latest
	for _, w := range batch[1:] {
		if w.latest.Before(latest) {
			latest = w.latest
		}
	}
	start := time.Now().Add(p.cfg.BookAhead)
	var bk Booking
	err := context.Cause(ctx)
	if err == nil && !start.After(latest) {
		bk, err = p.cfg.Slots.Reserve(ctx, len(batch), start, latest)
	} else if err == nil {
		bk.Free = start // no time left to book in
	}
	for i, w := range batch {
		switch {
		case err != nil:
			w.ready <- booked{err: err}
		case i < bk.Count:
			w.ready <- booked{slot: bk.First.Add(time.Duration(i) * bk.Interval)}
		default:
			w.ready <- booked{free: bk.Free}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.booking = false
		return
	}
	p.queue[0].ready <- booked{book: true}
}

// sleepUntil waits until t, or returns ctx's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
