package runner_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

func TestBackoffSchedule(t *testing.T) {
	const s = time.Second
	low := func(int64) int64 { return 0 }        // the least jitter: d/2
	high := func(n int64) int64 { return n - 1 } // the most: d
	mid := func(n int64) int64 { return n / 2 }  // halfway
	defaults := engine.BackoffSchedule{}         // 30 s × 4^(n-1), cap 1 h
	local := engine.BackoffSchedule{Base: 2 * s, Factor: 2, Cap: 10 * s}
	for _, tc := range []struct {
		name     string
		schedule engine.BackoffSchedule
		attempt  int
		random   func(int64) int64
		want     time.Duration
	}{
		{"defaults, attempt 1, least", defaults, 1, low, 15 * s},
		{"defaults, attempt 1, most", defaults, 1, high, 30 * s},
		{"defaults, attempt 2, least", defaults, 2, low, 60 * s},
		{"defaults, attempt 2, most", defaults, 2, high, 120 * s},
		{"defaults, attempt 3, halfway", defaults, 3, mid, 360 * s},
		{"defaults, attempt 4, most", defaults, 4, high, 1920 * s},
		{"defaults, attempt 5 is capped", defaults, 5, high, time.Hour},
		{"defaults, attempt 40 is capped, no overflow", defaults, 40, low, 30 * time.Minute},
		{"local, attempt 1", local, 1, high, 2 * s},
		{"local, attempt 1 least rounds up to a second", local, 1, low, 1 * s},
		{"local, attempt 3", local, 3, high, 8 * s},
		{"local, attempt 4 capped", local, 4, low, 5 * s},
		{"a cap past SQS's maximum is MaxBackoff", engine.BackoffSchedule{Base: time.Hour, Factor: 10, Cap: 48 * time.Hour}, 3, high, engine.MaxBackoff},
		{"a cap of exactly SQS's 12 h is MaxBackoff", engine.BackoffSchedule{Base: 12 * time.Hour, Factor: 1, Cap: 12 * time.Hour}, 1, high, engine.MaxBackoff},
		{"a base past the cap is the cap", engine.BackoffSchedule{Base: time.Hour, Factor: 2, Cap: time.Minute}, 1, high, time.Minute},
		{"attempt 0 reads as 1", local, 0, high, 2 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.schedule.Delay(tc.attempt, tc.random); got != tc.want {
				t.Errorf("Delay(%d) = %v, want %v", tc.attempt, got, tc.want)
			}
		})
	}
}

// Every delay lies in [d/2, d] for the real random source, and the steps
// of the default schedule span at least 21 minutes over the 4 retries five
// receives allow (docs/deploy.md).
func TestBackoffBounds(t *testing.T) {
	var s engine.BackoffSchedule
	var least time.Duration
	for attempt := 1; attempt <= 4; attempt++ {
		d := s.Step(attempt)
		least += d / 2
		for range 200 {
			got := s.Delay(attempt, func(n int64) int64 { return time.Now().UnixNano() % n })
			if got < d/2 || got > d {
				t.Fatalf("Delay(%d) = %v outside [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
	if least < 21*time.Minute {
		t.Errorf("five receives span at least %v, want ≥ 21m", least)
	}
}

// visibility is a Backoff that records every call.
type visibility struct {
	mu    sync.Mutex
	calls [][]engine.VisibilityChange
	err   error
}

func (v *visibility) ChangeVisibility(_ context.Context, changes []engine.VisibilityChange) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, slices.Clone(changes))
	return v.err
}

// backoffHarness is the runner with a recording Backoff and a jitter that
// always takes the most, so each timeout is the schedule's step.
func backoffHarness(t *testing.T) (*testkit.Harness, *effects, *visibility) {
	t.Helper()
	v := &visibility{}
	h, e := newHarness(t, func(c *runner.Config) {
		c.Backoff = v
		c.BackoffSchedule = engine.BackoffSchedule{Base: 10 * time.Second, Factor: 3, Cap: time.Hour}
		c.Random = func(n int64) int64 { return n - 1 }
	})
	return h, e, v
}

// A transient failure or a busy lease is postponed by the schedule's step
// for its attempt, in one call per batch; a success, a final attempt, a
// permanent failure and a deadline retry are not.
func TestTransientRetriesBackOff(t *testing.T) {
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	for _, tc := range []struct {
		name    string
		ctx     func() context.Context
		err     error
		busy    bool
		attempt int
		want    time.Duration // 0: no back-off
	}{
		{"transient failure, attempt 1", context.Background, errors.New("ThrottlingException"), false, 1, 10 * time.Second},
		{"transient failure, attempt 3", context.Background, errors.New("ThrottlingException"), false, 3, 90 * time.Second},
		{"busy lease, attempt 2", context.Background, nil, true, 2, 30 * time.Second},
		{"transient failure, final attempt", context.Background, errors.New("ThrottlingException"), false, 5, 0},
		{"busy lease, final attempt", context.Background, nil, true, 5, 0},
		{"deadline retry", cancelled, nil, false, 1, 0},
		{"handler hit the deadline", context.Background, context.DeadlineExceeded, false, 1, 0},
		{"permanent failure", context.Background, engine.Permanent(errors.New("bad address")), false, 1, 0},
		{"success", context.Background, nil, false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e, v := backoffHarness(t)
			e.fail(tc.err)
			env := notifyJob()
			if tc.busy {
				if _, err := h.Markers.Store.Lease(context.Background(), key(env), engine.Mark{Owner: "twin", Until: time.Now().Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
			}
			msg := testkit.Record(t, env, tc.attempt)
			failed := testkit.Run(t, tc.ctx(), h.Runner, msg)
			if tc.want == 0 {
				if len(v.calls) != 0 {
					t.Fatalf("backed off %v; want no back-off", v.calls)
				}
				return
			}
			if !slices.Equal(failed, []string{msg.MessageId}) {
				t.Fatalf("failures %v; a backed-off record is still a batch item failure", failed)
			}
			if len(v.calls) != 1 || len(v.calls[0]) != 1 || v.calls[0][0].Message.MessageId != msg.MessageId || v.calls[0][0].Timeout != tc.want {
				t.Fatalf("back-off calls %+v; want one of %s for %v", v.calls, msg.MessageId, tc.want)
			}
			if !strings.Contains(h.Logs.String(), `"retryInSeconds":`) {
				t.Errorf("the outcome line does not say when the record comes back: %s", h.Logs)
			}
		})
	}
}

// The retries of one batch back off in one call; its successes and
// dead letters are not in it.
func TestOneBackoffCallPerBatch(t *testing.T) {
	h, e, v := backoffHarness(t)
	e.fail(errors.New("TooManyRequestsException"))
	var msgs []events.SQSMessage
	for attempt := range 4 {
		msgs = append(msgs, testkit.Record(t, notifyJob(), attempt+1))
	}
	final := testkit.Record(t, notifyJob(), 5)
	bad := testkit.RawRecord("not json", 1)
	failed := h.Run(t, append(msgs, final, bad)...)
	if len(failed) != 5 {
		t.Fatalf("failures %v; want the four retries and the final attempt", failed)
	}
	if len(v.calls) != 1 {
		t.Fatalf("%d back-off calls for one batch, want 1", len(v.calls))
	}
	var got []string
	for _, c := range v.calls[0] {
		got = append(got, c.Message.MessageId)
	}
	var want []string
	for _, m := range msgs {
		want = append(want, m.MessageId)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("backed off %v, want %v (not the final attempt, not the dead letter)", got, want)
	}
}

// A back-off that fails is logged; its records stay batch item failures,
// which SQS retries after the queue's visibility timeout.
func TestFailedBackoffKeepsTheRetry(t *testing.T) {
	h, e, v := backoffHarness(t)
	v.err = errors.New("AccessDenied")
	e.fail(errors.New("ThrottlingException"))
	msg := testkit.Record(t, notifyJob(), 1)
	if failed := h.Run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want the retry kept", failed)
	}
	logs := h.Logs.String()
	if !strings.Contains(logs, "back-off failed") || strings.Contains(logs, `"retryInSeconds":`) {
		t.Fatalf("want the failed back-off logged and no retryIn claimed: %s", logs)
	}
}

// SQS counts its 12 h from the record's receipt, not from the change: a
// record's wait is cut to what is left of them (less a minute), and a
// record with nothing left is not backed off. The receipt is the first
// receive's timestamp for a first receive; a later receive counts from the
// batch's start less 15 minutes.
func TestBackoffStaysInsideTwelveHoursFromTheReceipt(t *testing.T) {
	received := func(ago time.Duration) string {
		return strconv.FormatInt(time.Now().Add(-ago).UnixMilli(), 10)
	}
	for _, tc := range []struct {
		name    string
		attempt int
		ago     time.Duration // "" attribute when 0
		// least and most bound the timeout asked for (0, 0: no back-off)
		least, most time.Duration
	}{
		{"just received: the schedule's 11 h", 1, time.Second, engine.MaxBackoff, engine.MaxBackoff},
		{"received 11 h 30 min ago", 1, 11*time.Hour + 30*time.Minute, 28 * time.Minute, 29 * time.Minute},
		{"received 11 h 59 min 30 s ago: nothing left", 1, 11*time.Hour + 59*time.Minute + 30*time.Second, 0, 0},
		{"a later receive: counted from the batch less 15 min", 2, 11*time.Hour + 30*time.Minute, engine.MaxBackoff, engine.MaxBackoff},
		{"no timestamp", 1, 0, engine.MaxBackoff, engine.MaxBackoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &visibility{}
			h, e := newHarness(t, func(c *runner.Config) {
				c.Backoff = v
				c.BackoffSchedule = engine.BackoffSchedule{Base: 12 * time.Hour, Factor: 1, Cap: 12 * time.Hour}
				c.Random = func(n int64) int64 { return n - 1 }
			})
			e.fail(errors.New("ThrottlingException"))
			msg := testkit.Record(t, notifyJob(), tc.attempt)
			if tc.ago > 0 {
				msg.Attributes["ApproximateFirstReceiveTimestamp"] = received(tc.ago)
			}
			h.Run(t, msg)
			if tc.most == 0 {
				if len(v.calls) != 0 {
					t.Fatalf("backed off %+v; want no back-off (SQS would refuse it)", v.calls)
				}
				return
			}
			if len(v.calls) != 1 || len(v.calls[0]) != 1 {
				t.Fatalf("back-off calls %+v; want one change", v.calls)
			}
			if d := v.calls[0][0].Timeout; d < tc.least || d > tc.most {
				t.Fatalf("asked for %v; want %v to %v", d, tc.least, tc.most)
			}
		})
	}
}

// One refused change does not drop the back-off of the others: a
// VisibilityError naming one record leaves the rest backed off (their
// outcome lines say when they come back), and the refused one is logged.
func TestPartlyRefusedBackoffKeepsTheOthers(t *testing.T) {
	h, e, v := backoffHarness(t)
	e.fail(errors.New("ThrottlingException"))
	var msgs []events.SQSMessage
	for range 3 {
		msgs = append(msgs, testkit.Record(t, notifyJob(), 1))
	}
	refused := msgs[1].MessageId
	v.err = &engine.VisibilityError{Failed: map[string]error{refused: errors.New("refused: InvalidParameterValue")}}
	if failed := h.Run(t, msgs...); len(failed) != 3 {
		t.Fatalf("failures %v; every retry stays a batch item failure", failed)
	}
	logs := h.Logs.String()
	if !strings.Contains(logs, "back-off failed for some records") || !strings.Contains(logs, refused) {
		t.Errorf("the refused change is not logged with its record: %s", logs)
	}
	seen := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"job outcome"`) {
			continue
		}
		for _, m := range msgs {
			if !strings.Contains(line, m.MessageId) {
				continue
			}
			seen++
			backedOff := strings.Contains(line, `"retryInSeconds":`)
			if want := m.MessageId != refused; backedOff != want {
				t.Errorf("record %s: retryIn in its outcome line %v, want %v: %s", m.MessageId, backedOff, want, line)
			}
		}
	}
	if seen != len(msgs) {
		t.Fatalf("found %d outcome lines of the %d records: %s", seen, len(msgs), logs)
	}
}
