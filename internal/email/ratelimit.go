package email

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/time/rate"
)

// SendRate is the rate one invocation of the e-mail worker may send at so
// that all of them together stay within the account's SES rate:
// accountRate (mails per second) divided by the most invocations that run
// at once (the sum of the worker's event sources' MaximumConcurrency). It
// is 0 (no limit) when accountRate is not positive.
func SendRate(accountRate float64, invocations int) rate.Limit {
	if accountRate <= 0 {
		return 0
	}
	return rate.Limit(accountRate / float64(max(invocations, 1)))
}

// ErrSendRate is the failure of a send the worker's share of the SES rate
// cannot make before the invocation's deadline: a transient failure, retried
// (and backed off) like a throttled send, without calling SES.
var ErrSendRate = errors.New("email: no send within this worker's share of the SES rate before the deadline")

// Limited is a Sender that waits for its share of the send rate before each
// send, so a container never sends faster than its limiter allows.
type Limited struct {
	next    Sender
	limiter *rate.Limiter
}

// NewLimited returns next limited to perSecond sends per second, one at a
// time (a burst of one: the containers that start together send at most one
// mail each at once). A perSecond of 0 is no limit.
func NewLimited(next Sender, perSecond rate.Limit) *Limited {
	if perSecond <= 0 {
		perSecond = rate.Inf
	}
	return &Limited{next: next, limiter: rate.NewLimiter(perSecond, 1)}
}

// Send waits for the limiter, then sends. A wait that would end past the
// context's deadline fails at once with ErrSendRate; a cancelled context
// returns its error.
func (l *Limited) Send(ctx context.Context, m Message) error {
	if err := l.limiter.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w (%.3g mails/s): %w", ErrSendRate, float64(l.limiter.Limit()), err)
	}
	return l.next.Send(ctx, m)
}
