package sesmodel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/sendrate"
	"github.com/runstwice/runstwice/message"
)

// Latency is how long each simulated call takes on the fake clock.
type Latency struct {
	// SQS is every queue call (receive, delete, send, visibility change).
	SQS time.Duration
	// DynamoDB is every table call (markers, users, the send schedule).
	DynamoDB time.Duration
	// SES is a send's answer (the send counts when it arrives).
	SES time.Duration
	// Invoke is Lambda's part of an invocation, before the handler runs.
	Invoke time.Duration
}

// DefaultLatency is what a region's services answer in at the median:
// about 10 ms for SQS, 5 ms for DynamoDB, 60 ms for SES, 20 ms for Lambda.
var DefaultLatency = Latency{SQS: 10 * time.Millisecond, DynamoDB: 5 * time.Millisecond, SES: 60 * time.Millisecond, Invoke: 20 * time.Millisecond}

// ses is SES with the account's rate: a send that would make more than
// rate sends in the last second is refused as throttled (SES v2's
// TooManyRequestsException, transient), and one past the daily quota, when
// the model has one, with the quota.
type ses struct {
	rate    int
	latency time.Duration
	// quota: sends after quotaAfter are refused until quotaUntil.
	quotaAfter int
	quotaUntil time.Time

	mu        sync.Mutex
	at        []time.Time
	byID      map[string]int
	throttled int
	refused   int
}

// errThrottled is SES's throttle, as the ses adapter returns it (transient).
var errThrottled = fmt.Errorf("ses: send: TooManyRequestsException")

func (s *ses) Send(_ context.Context, m email.Message) error {
	now := time.Now()
	s.mu.Lock()
	var err error
	switch {
	case s.quotaAfter > 0 && len(s.at) >= s.quotaAfter && now.Before(s.quotaUntil):
		s.refused++
		err = fmt.Errorf("ses: send %s: TooManyRequestsException: %w", m.ID, email.ErrDailyQuota)
	case s.inLastSecond(now) >= s.rate:
		s.throttled++
		err = errThrottled
	default:
		s.at = append(s.at, now)
		s.byID[m.ID]++
	}
	s.mu.Unlock()
	time.Sleep(s.latency)
	return err
}

// inLastSecond counts the sends in (now-1s, now]. Callers hold mu.
func (s *ses) inLastSecond(now time.Time) int {
	n := 0
	for i := len(s.at) - 1; i >= 0 && s.at[i].After(now.Add(-time.Second)); i-- {
		n++
	}
	return n
}

// users is the users table: every user opted into the digest, confirmed.
type users struct{ latency time.Duration }

func (u users) Get(_ context.Context, id string) (email.User, bool, error) {
	time.Sleep(u.latency)
	return email.User{ID: id, Email: id + "@example.com", DisplayName: "Partner " + id, EmailConfirmed: true}, true, nil
}

func (u users) SetToken(context.Context, string, email.Token, bool) error {
	time.Sleep(u.latency)
	return nil
}

// markers is the markers table: the in-memory store, each hot call taking
// DynamoDB's latency.
type markers struct {
	engine.Store
	latency time.Duration
}

func (m markers) PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	time.Sleep(m.latency)
	return m.Store.PeekBatch(ctx, keys)
}

func (m markers) Lease(ctx context.Context, k engine.Key, mk engine.Mark) (engine.Record, error) {
	time.Sleep(m.latency)
	return m.Store.Lease(ctx, k, mk)
}

func (m markers) Claim(ctx context.Context, k engine.Key, mk engine.Mark) (bool, error) {
	time.Sleep(m.latency)
	return m.Store.Claim(ctx, k, mk)
}

// schedule is the account's send schedule (sendrate's Memory) with
// DynamoDB's latency. It counts the bookings, and the UpdateItems the
// DynamoDB schedule would make for them: one when the booking container's
// last view of the schedule still holds, two when another container booked
// since (the failed condition returns the item; sendrate's tests measure
// both on moto).
type schedule struct {
	mem     *sendrate.Memory
	latency time.Duration

	mu       sync.Mutex
	bookings int
	writes   int
}

// view is one container's use of the schedule: the first free slot its
// last booking saw.
type view struct {
	s    *schedule
	seen time.Time
}

func (v *view) Reserve(ctx context.Context, n int, start, latest time.Time) (email.Booking, error) {
	time.Sleep(v.s.latency)
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	free := v.s.mem.Free()
	idle := free.Before(start) && v.seen.Before(start)
	b, err := v.s.mem.Reserve(ctx, n, start, latest)
	v.s.bookings++
	v.s.writes++
	if !idle && !v.seen.Equal(free) {
		v.s.writes++
	}
	v.seen = b.Free
	return b, err
}

// on is every kill switch on.
type on struct{}

func (on) IsJobEnabled(context.Context, string, bool) bool { return true }

// sqs routes the runner's queue calls (park, dead letter, back-off) to the
// simulated queues, and counts them.
type sqs struct {
	queues map[message.Queue]*queue
	byARN  map[string]*queue

	mu      sync.Mutex
	copies  int // parks and snoozes: new copies sent
	dead    int // dead-lettered by the runner
	reasons map[string]int
}

func (s *sqs) Park(_ context.Context, msg events.SQSMessage, delay time.Duration) error {
	var jobType string
	if a, ok := msg.MessageAttributes[sqsqueue.AttrType]; ok && a.StringValue != nil {
		jobType = *a.StringValue
	}
	s.byARN[msg.EventSourceARN].send(msg.Body, jobType, delay)
	s.mu.Lock()
	s.copies++
	s.mu.Unlock()
	return nil
}

func (s *sqs) DeadLetter(_ context.Context, msg events.SQSMessage, reason string) error {
	time.Sleep(s.byARN[msg.EventSourceARN].latency)
	s.mu.Lock()
	s.dead++
	s.reasons[reason]++
	s.mu.Unlock()
	return nil
}

func (s *sqs) ChangeVisibility(ctx context.Context, changes []engine.VisibilityChange) error {
	if len(changes) == 0 {
		return nil
	}
	return s.byARN[changes[0].Message.EventSourceARN].changeVisibility(ctx, changes)
}
