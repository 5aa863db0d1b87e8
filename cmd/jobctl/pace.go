package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/deadletter"
)

// clock is the time source of pacing and progress; tests give a fake one.
type clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	return smithytime.SleepWithContext(ctx, d)
}

// limiter paces events to a rate: a token bucket of one token refilled every
// interval, so the n-th event of a run starts no earlier than interval × n
// after the first, and idle time never saves up a burst.
type limiter struct {
	interval time.Duration
	clk      clock
	next     time.Time
}

// newLimiter returns a limiter of perSecond events a second; nil (no limit)
// when perSecond is 0.
func newLimiter(perSecond float64, clk clock) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{interval: time.Duration(float64(time.Second) / perSecond), clk: clk}
}

// Wait blocks until the next event may start.
func (l *limiter) Wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	now := l.clk.Now()
	if l.next.Before(now) {
		l.next = now
	}
	wait := l.next.Sub(now)
	l.next = l.next.Add(l.interval)
	if wait <= 0 {
		return nil
	}
	return l.clk.Sleep(ctx, wait)
}

// parseRate reads --rate: "N/s", "N/m" or "N" (per second); "0" is no limit.
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n > 10_000 {
		return 0, usagef("--rate %q is not a rate (e.g. 10/s, 120/m; 0 for no limit)", s)
	}
	switch unit {
	case "", "s", "sec":
		return n, nil
	case "m", "min":
		return n / 60, nil
	}
	return 0, usagef("--rate %q: the unit is /s or /m", s)
}

// pacedSender holds every send to the limiter's rate.
type pacedSender struct {
	next    deadletter.Sender
	limiter *limiter
}

func (p pacedSender) Send(ctx context.Context, m sqsqueue.Message) error {
	if err := p.limiter.Wait(ctx); err != nil {
		return err
	}
	return p.next.Send(ctx, m)
}

// progress is the live line of a long batch, on stderr: redrawn in place on
// a terminal, else one line every longAfter once a run has lasted that long
// (so a log of a long run shows it moving, and a short one stays quiet).
type progress struct {
	w     io.Writer
	tty   bool
	clk   clock
	verb  string
	total int
	start time.Time
	last  time.Time
	drawn bool
}

const (
	ttyEvery  = 200 * time.Millisecond
	longAfter = 10 * time.Second
)

func newProgress(w io.Writer, tty bool, clk clock, verb string, total int) *progress {
	now := clk.Now()
	return &progress{w: w, tty: tty, clk: clk, verb: verb, total: total, start: now, last: now}
}

// Update reports done letters of total, with the outcome counts so far.
func (p *progress) Update(done int, counts map[deadletter.Outcome]int) {
	now := p.clk.Now()
	switch {
	case p.tty:
		if done < p.total && now.Sub(p.last) < ttyEvery {
			return
		}
	case now.Sub(p.start) < longAfter:
		return // a short run stays quiet off a terminal
	case done < p.total && p.drawn && now.Sub(p.last) < longAfter:
		return
	}
	p.last, p.drawn = now, true
	line := fmt.Sprintf("%s %d/%d", p.verb, done, p.total)
	if elapsed := now.Sub(p.start).Seconds(); elapsed > 0 && done > 0 {
		rate := float64(done) / elapsed
		line += fmt.Sprintf(" (%.1f/s, %s left)", rate, time.Duration(float64(p.total-done)/rate*float64(time.Second)).Round(time.Second))
	}
	line += " " + summary(counts)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		if done == p.total {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

// summary names the non-zero outcome counts in a fixed order.
func summary(counts map[deadletter.Outcome]int) string {
	var parts []string
	for _, o := range []deadletter.Outcome{deadletter.Redrove, deadletter.WouldRedrive, deadletter.Dropped, deadletter.WouldDrop,
		deadletter.Superseded, deadletter.Skipped, deadletter.Failed} {
		if n := counts[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
	}
	if len(parts) == 0 {
		return "nothing done"
	}
	return strings.Join(parts, ", ")
}
