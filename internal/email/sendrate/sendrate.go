// Package sendrate is the account's SES send schedule (the email.Slots
// port): one item that holds the schedule's first free slot, in the jobs
// table under the key rate#ses-send, moved forward by every booking with a
// conditional UpdateItem (docs/storage.md). Slots are 1/rate apart, so the
// sends of every invocation together never exceed the rate, and whoever
// has work books the next slots: a queue alone with a backlog may use the
// whole rate. Memory is the same schedule in one process, for tests and
// the scale model.
package sendrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/email"
)

// The schedule's item: its key in the jobs table, the attribute that holds
// the first free slot (Unix nanoseconds) and its life: a day after the last
// booking, so an idle stack's item goes (an expired one reads as idle).
const (
	AttrPK   = "pk"
	Key      = "rate#ses-send"
	AttrNext = "nextFree"
	life     = 24 * time.Hour
	// attempts bounds the conditional writes of one booking: each failed
	// condition returns the item, so the next attempt is right unless
	// another booking came in between.
	attempts = 5
)

// ErrContended is returned when every attempt of a booking lost its race to
// another booking.
var ErrContended = errors.New("sendrate: the schedule changed under every attempt to book")

// Interval is the time between two slots at rate mails per second: rounded
// up to the nanosecond, so no second holds more than rate slots.
func Interval(rate float64) time.Duration {
	return time.Duration(math.Ceil(float64(time.Second) / rate))
}

// plan is what a booking of up to n slots from start to latest books when
// the schedule's first free slot is free: its first slot and how many.
func plan(free time.Time, n int, start, latest time.Time, interval time.Duration) (first time.Time, count int) {
	first = start
	if free.After(first) {
		first = free
	}
	if first.After(latest) {
		return first, 0
	}
	return first, min(n, int(latest.Sub(first)/interval)+1)
}

// Memory is the schedule in memory: a Slots for one process.
type Memory struct {
	interval time.Duration
	mu       sync.Mutex
	free     time.Time
}

// NewMemory returns an empty schedule at rate mails per second.
func NewMemory(rate float64) *Memory { return &Memory{interval: Interval(rate)} }

// Free returns the schedule's first free slot (zero before any booking).
func (m *Memory) Free() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.free
}

// Reserve implements email.Slots.
func (m *Memory) Reserve(_ context.Context, n int, start, latest time.Time) (email.Booking, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first, count := plan(m.free, n, start, latest, m.interval)
	if count > 0 {
		m.free = first.Add(time.Duration(count) * m.interval)
	}
	return email.Booking{First: first, Count: count, Interval: m.interval, Free: maxTime(m.free, first)}, nil
}

// DynamoAPI is the part of the DynamoDB client the schedule uses.
type DynamoAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Table is the schedule in DynamoDB, shared by every container.
type Table struct {
	client   DynamoAPI
	table    string
	interval time.Duration
	// seen is the first free slot the last booking saw: it picks which
	// write to try first.
	mu   sync.Mutex
	seen time.Time
}

// New returns the schedule at rate mails per second in table (the jobs
// table).
func New(client DynamoAPI, table string, rate float64) *Table {
	return &Table{client: client, table: table, interval: Interval(rate)}
}

// Reserve implements email.Slots with one conditional UpdateItem when it
// guessed the schedule's state right, and one more per guess it got wrong.
// Two writes exist: behind a busy schedule (its first free slot is not in
// the past) the slot moves on by the booking, if the booking still ends by
// latest; an idle schedule (no item, or a first free slot in the past)
// starts again at start. A failed condition returns the item, which says
// which write holds and how many slots still fit.
func (t *Table) Reserve(ctx context.Context, n int, start, latest time.Time) (email.Booking, error) {
	t.mu.Lock()
	free := t.seen
	t.mu.Unlock()
	for range attempts {
		first, count := plan(free, n, start, latest, t.interval)
		if count == 0 {
			return email.Booking{First: first, Interval: t.interval, Free: maxTime(free, start)}, nil
		}
		busy := !free.Before(start)
		got, err := t.book(ctx, busy, count, start, first)
		if err == nil {
			t.remember(got)
			return email.Booking{First: first, Count: count, Interval: t.interval, Free: got}, nil
		}
		if !ddb.IsConditionFailed(err) {
			return email.Booking{}, fmt.Errorf("sendrate: book %d slots: %w", count, err)
		}
		free, err = nextFree(ddb.OldItem(err))
		if err != nil {
			return email.Booking{}, err
		}
		t.remember(free)
	}
	return email.Booking{}, ErrContended
}

// book writes one booking of count slots from first: behind a busy
// schedule whose first free slot is first, or on an idle one from first (=
// start). It returns the schedule's new first free slot.
func (t *Table) book(ctx context.Context, busy bool, count int, start, first time.Time) (time.Time, error) {
	next := expression.Name(AttrNext)
	span := int64(count) * int64(t.interval)
	end := first.Add(time.Duration(span))
	upd := expression.Set(expression.Name(ddb.AttrExpiresAt), expression.Value(end.Add(life).Unix()))
	var cond expression.ConditionBuilder
	if busy {
		// Only if the first free slot is still the one planned from.
		upd = upd.Set(next, expression.Plus(next, expression.Value(span)))
		cond = next.Equal(expression.Value(first.UnixNano()))
	} else {
		upd = upd.Set(next, expression.Value(end.UnixNano()))
		cond = expression.AttributeNotExists(next).Or(next.LessThan(expression.Value(start.UnixNano())))
	}
	u, err := ddb.Update(t.table, ddb.KeyS(AttrPK, Key), upd, cond, true)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := t.client.UpdateItem(ctx, ddb.UpdateInput(u)); err != nil {
		return time.Time{}, err
	}
	return end, nil
}

// nextFree reads the first free slot of the item a failed condition
// returned (zero for none: the schedule is idle).
func nextFree(item map[string]types.AttributeValue) (time.Time, error) {
	n, ok := item[AttrNext].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, nil
	}
	ns, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("sendrate: %s %q is not a number: %w", AttrNext, n.Value, err)
	}
	return time.Unix(0, ns), nil
}

func (t *Table) remember(free time.Time) {
	t.mu.Lock()
	t.seen = free
	t.mu.Unlock()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

var (
	_ email.Slots = (*Memory)(nil)
	_ email.Slots = (*Table)(nil)
)
