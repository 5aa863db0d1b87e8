package email_test

import (
	"context"
	"errors"
	"github.com/runstwice/runstwice/engine/enginetest"
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/email"
)

func TestSendRate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		accountRate float64
		invocations int
		want        rate.Limit
	}{
		{"SES sandbox, the template's 17 invocations", 1, 17, rate.Limit(1.0 / 17)},
		{"a new production account", 14, 17, rate.Limit(14.0 / 17)},
		{"a raised quota", 100, 17, rate.Limit(100.0 / 17)},
		{"the local stack's three pollers", 2, 3, rate.Limit(2.0 / 3)},
		{"no invocation count reads as one", 14, 0, 14},
		{"no account rate is no limit", 0, 17, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := email.SendRate(tc.accountRate, tc.invocations); math.Abs(float64(got-tc.want)) > 1e-12 {
				t.Errorf("SendRate(%v, %d) = %v, want %v", tc.accountRate, tc.invocations, got, tc.want)
			}
		})
	}
}

// All invocations together, each with its own limiter at SendRate and a
// burst of one, never send more than the account's rate plus one mail each
// over any stretch of time: the formula's promise.
func TestInvocationsTogetherStayWithinTheAccountRate(t *testing.T) {
	for _, tc := range []struct {
		accountRate float64
		invocations int
	}{{1, 17}, {14, 17}, {2, 3}, {100, 17}} {
		start := time.Unix(0, 0)
		limiters := make([]*rate.Limiter, tc.invocations)
		for i := range limiters {
			limiters[i] = rate.NewLimiter(email.SendRate(tc.accountRate, tc.invocations), 1)
		}
		const seconds = 120
		sent := 0
		// Every invocation tries to send every millisecond.
		for ms := range seconds * 1000 {
			now := start.Add(time.Duration(ms) * time.Millisecond)
			for _, l := range limiters {
				if l.AllowN(now, 1) {
					sent++
				}
			}
		}
		if most := tc.accountRate*seconds + float64(tc.invocations); float64(sent) > most {
			t.Errorf("rate %v over %d invocations: %d mails in %d s, more than %v", tc.accountRate, tc.invocations, sent, seconds, most)
		}
		if least := tc.accountRate * seconds * 0.95; float64(sent) < least {
			t.Errorf("rate %v over %d invocations: only %d mails in %d s (want ≥ %v): the share is too small", tc.accountRate, tc.invocations, sent, seconds, least)
		}
	}
}

// A send the rate cannot fit before the deadline fails at once, transient
// and without calling SES; a cancelled context is its own error.
func TestLimitedSend(t *testing.T) {
	next := &fakeSender{tr: &enginetest.Trace{}}
	l := email.NewLimited(next, 0.5) // one mail every 2 s
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := l.Send(ctx, email.Message{ID: "m-1"}); err != nil {
		t.Fatalf("first send (the burst): %v", err)
	}
	began := time.Now()
	err := l.Send(ctx, email.Message{ID: "m-2"})
	if !errors.Is(err, email.ErrSendRate) || engine.IsPermanent(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second send: %v; want a transient ErrSendRate", err)
	}
	if waited := time.Since(began); waited > 200*time.Millisecond {
		t.Errorf("the refused send waited %v; it should fail at once", waited)
	}
	if n := len(next.messages()); n != 1 {
		t.Fatalf("SES got %d sends, want 1", n)
	}
	cancel()
	if err := l.Send(ctx, email.Message{ID: "m-3"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send on a cancelled context: %v", err)
	}

	// No rate is no limit.
	free := email.NewLimited(next, 0)
	for i := range 20 {
		if err := free.Send(context.Background(), email.Message{ID: "f"}); err != nil {
			t.Fatalf("unlimited send %d: %v", i, err)
		}
	}
}
