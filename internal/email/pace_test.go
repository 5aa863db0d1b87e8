package email_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/sendrate"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/testkit"
)

// clockSES is SES on the bubble's clock: it records when each send arrived,
// and answers err (when set) instead of sending.
type clockSES struct {
	mu    sync.Mutex
	at    []time.Time
	calls int
	err   error
}

func (s *clockSES) Send(context.Context, email.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return s.err
	}
	s.at = append(s.at, time.Now())
	return nil
}

func (s *clockSES) sent() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

// countedSlots counts the bookings of a schedule, each taking 5 ms (a
// DynamoDB round trip): the sends that come meanwhile wait for the next.
type countedSlots struct {
	email.Slots
	calls atomic.Int64
}

func (c *countedSlots) Reserve(ctx context.Context, n int, start, latest time.Time) (email.Booking, error) {
	c.calls.Add(1)
	time.Sleep(5 * time.Millisecond)
	return c.Slots.Reserve(ctx, n, start, latest)
}

func paced(t *testing.T, next email.Sender, slots email.Slots, metrics *engine.Metrics) *email.Paced {
	t.Helper()
	p, err := email.NewPaced(next, email.Pacing{Slots: slots, QuotaWait: 15 * time.Minute, Metrics: metrics, Random: func(int64) int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sendAll sends n mails at once through p under a deadline of d and
// returns each send's error.
func sendAll(p *email.Paced, n int, d time.Duration) []error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = p.Send(ctx, email.Message{ID: fmt.Sprintf("m-%d", i)}) })
	}
	wg.Wait()
	return errs
}

// The sends of two containers share one schedule: together they send one
// mail per slot, the slots 1/rate apart, never two in any second at a rate
// of two; a send whose slot would come after its invocation's deadline
// (less the send time) is not sent but snoozed until the booked slots have
// passed; and each container books for its sends waiting together in one
// call or two, not one per send.
func TestPacedSendsShareOneSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ses := &clockSES{}
		slots := &countedSlots{Slots: sendrate.NewMemory(2)}
		a, b := paced(t, ses, slots, nil), paced(t, ses, slots, nil)
		began := time.Now()
		var errs [2][]error
		var wg sync.WaitGroup
		wg.Go(func() { errs[0] = sendAll(a, 10, 10*time.Second) })
		wg.Go(func() { errs[1] = sendAll(b, 10, 10*time.Second) })
		wg.Wait()

		sent := ses.sent()
		// Slots from 50 ms on, 0.5 s apart, the last by 10 s - 2 s.
		if len(sent) != 16 {
			t.Fatalf("%d sends; want the 16 slots from 0.05 s to 7.55 s", len(sent))
		}
		for i := 1; i < len(sent); i++ {
			if gap := sent[i].Sub(sent[i-1]); gap < 500*time.Millisecond {
				t.Errorf("sends %d and %d %v apart; the rate of 2/s wants 500ms", i-1, i, gap)
			}
		}
		if last := sent[len(sent)-1].Sub(began); last > 8*time.Second {
			t.Errorf("the last send left at %v, past the deadline less the send time (8s)", last)
		}
		snoozed := 0
		for _, e := range append(errs[0], errs[1]...) {
			var s *engine.SnoozeError
			switch {
			case e == nil:
			case errors.As(e, &s) && !s.Park && s.Delay >= 8*time.Second-time.Since(began):
				snoozed++
			default:
				t.Errorf("send: %v; want a success or a snooze until the booked slots end", e)
			}
		}
		if snoozed != 4 {
			t.Errorf("%d sends snoozed; want the 4 that did not fit", snoozed)
		}
		if n := slots.calls.Load(); n > 4 {
			t.Errorf("%d bookings for two containers' 10 sends each; want one or two each", n)
		}
	})
}

// A container alone with work books every slot: ten sends at a rate of ten
// leave within a second, where a fixed share of 1/17 of the rate took 17.
func TestPacedAloneUsesTheWholeRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ses := &clockSES{}
		p := paced(t, ses, sendrate.NewMemory(10), nil)
		began := time.Now()
		for _, err := range sendAll(p, 10, 30*time.Second) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("10 sends at 10/s took %v; want under a second", took)
		}
	})
}

// SES's daily quota (or a pause) parks the job for the quota wait, says
// why, and is counted; for a minute every later send of the container parks
// too without calling SES; after it, the container asks SES again.
func TestPacedParksWhatSESRefusesForItsQuota(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		metric string
		reason string
	}{
		{"daily quota", fmt.Errorf("ses: send m-1: TooManyRequestsException: %w", email.ErrDailyQuota), obs.SesDailyQuota, email.ReasonDailyQuota},
		{"sending paused", fmt.Errorf("ses: send m-1: SendingPausedException: %w", email.ErrSendingPaused), obs.SesSendingPaused, email.ReasonPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ses := &clockSES{err: tc.err}
				buf := &testkit.Buffer{}
				metrics := engine.NewMetrics(buf, obs.Namespace)
				p := paced(t, ses, sendrate.NewMemory(1), metrics)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				for i := range 3 {
					err := p.Send(ctx, email.Message{ID: "m"})
					var s *engine.SnoozeError
					if !errors.As(err, &s) || !s.Park || s.Delay != 15*time.Minute || s.Reason != tc.reason {
						t.Fatalf("send %d: %v; want parked for 15m with %q", i, err, tc.reason)
					}
				}
				if ses.calls != 1 {
					t.Errorf("SES asked %d times; want once, then the container knows", ses.calls)
				}
				metrics.Flush()
				if n := obstest.Count(buf.String(), "ses", tc.metric); n != 3 {
					t.Errorf("%s counted %v times; want 3 (%s)", tc.metric, n, buf)
				}
				time.Sleep(time.Minute)
				ses.mu.Lock()
				ses.err = nil
				ses.mu.Unlock()
				ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := p.Send(ctx, email.Message{ID: "m"}); err != nil || ses.calls != 2 {
					t.Fatalf("after the wait: %v, SES asked %d times; want a send", err, ses.calls)
				}
			})
		})
	}
}

// failingSlots cannot book.
type failingSlots struct{ err error }

func (f failingSlots) Reserve(context.Context, int, time.Time, time.Time) (email.Booking, error) {
	return email.Booking{}, f.err
}

// A schedule that cannot be read is a transient failure (retried and
// backed off), never a snooze or a send; a cancelled wait is the context's
// error.
func TestPacedFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ses := &clockSES{}
		down := errors.New("DynamoDB unreachable")
		err := paced(t, ses, failingSlots{down}, nil).Send(context.Background(), email.Message{ID: "m"})
		var s *engine.SnoozeError
		if !errors.Is(err, down) || engine.IsPermanent(err) || errors.As(err, &s) {
			t.Fatalf("send on a schedule that fails: %v; want its transient error", err)
		}

		p := paced(t, ses, sendrate.NewMemory(1), nil)
		if err := p.Send(context.Background(), email.Message{ID: "first"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := p.Send(ctx, email.Message{ID: "second"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("send cancelled while it waits for its slot: %v", err)
		}
		if ses.calls != 1 {
			t.Errorf("SES asked %d times; want only the first send", ses.calls)
		}
	})
	if _, err := email.NewPaced(&clockSES{}, email.Pacing{}); err == nil {
		t.Error("NewPaced without Slots: no error")
	}
}
