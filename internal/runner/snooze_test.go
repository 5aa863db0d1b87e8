package runner_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// A job whose handler must wait (Snooze) is re-sent as a new copy after the
// delay and its delivery succeeds: no retry, no back-off, no receive spent,
// even on the final attempt. Its lease is released first; the record is
// left alone, unless the snooze parks (SnoozeParked), when it says Parked
// with the reason.
func TestSnoozeResendsACopyAndSpendsNoReceive(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		receives  int
		delay     time.Duration
		trace     string
		outcome   string
		metric    string
		parked    bool
		reasonHas string
	}{
		{"a send slot", engine.Snooze(2300*time.Millisecond, "no send slot of the SES rate before the deadline"), 1,
			3 * time.Second, "peek lease load release park", "snoozed", engine.JobsSnoozed, false, "no send slot"},
		{"on the final attempt", engine.Snooze(4*time.Second, "no send slot"), 5,
			4 * time.Second, "peek lease load release park", "snoozed", engine.JobsSnoozed, false, "no send slot"},
		{"wrapped, no delay", fmt.Errorf("email: send: %w", engine.Snooze(0, "no send slot")), 2,
			time.Second, "peek lease load release park", "snoozed", engine.JobsSnoozed, false, "no send slot"},
		{"a daily quota parks", engine.SnoozeParked(20*time.Minute, "SES's daily sending quota is used up"), 3,
			engine.MaxDelay, "peek lease load release mark-parked record-outcome park", "parked", engine.JobsParked, true, "daily sending quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &visibility{}
			h, e := newHarness(t, func(c *runner.Config) { c.Backoff = v })
			e.fail(tc.err)
			env := notifyJob()
			msg := testkit.Record(t, env, tc.receives)
			msg.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:" + string(notify.Queue) // the copy goes back where it came from
			if failed := h.Run(t, msg); len(failed) != 0 {
				t.Fatalf("failures %v; a snoozed job's delivery succeeds (its copy carries it on)", failed)
			}
			if len(v.calls) != 0 {
				t.Errorf("back-off calls %v; a snooze is not a retry", v.calls)
			}
			parked := h.Queues.ParkedMessages()
			if len(parked) != 1 || parked[0].Body != msg.Body || parked[0].Queue != string(notify.Queue) || parked[0].Delay != tc.delay {
				t.Fatalf("copies %+v; want the same body on %s after %v", parked, notify.Queue, tc.delay)
			}
			if got := h.Trace.String(); got != tc.trace {
				t.Fatalf("trace %q; want %q", got, tc.trace)
			}
			if got := h.Outcomes()[env.MessageID]; got != tc.outcome {
				t.Errorf("outcome %q; want %q\n%s", got, tc.outcome, h.Logs)
			}
			if !strings.Contains(h.Logs.String(), tc.reasonHas) {
				t.Errorf("the outcome line does not say why (%q): %s", tc.reasonHas, h.Logs)
			}
			if h.Count(notify.Name, tc.metric) != 1 || h.Count(notify.Name, engine.JobsFailed) != 0 {
				t.Errorf("metrics %s; want one %s and no JobsFailed", h.Metrics, tc.metric)
			}
			if rec, ok := h.MarkerOf(env); ok {
				t.Errorf("marker %+v after a snooze; want none (the lease released, nothing claimed)", rec)
			}
			state, _ := h.Jobs.State(env.MessageID)
			outcome, reason := h.Jobs.Outcome(env.MessageID)
			if tc.parked != (state == jobs.StateParked) || tc.parked != (outcome == engine.OutcomeParked && strings.Contains(reason, tc.reasonHas)) {
				t.Errorf("record state %q, outcome %q (%q); parked = %v", state, outcome, reason, tc.parked)
			}
		})
	}
}

// A copy that cannot be sent is retried, never dropped; a job cancelled
// while it would park is not sent again.
func TestSnoozeThatCannotBeSentIsRetried(t *testing.T) {
	h, e := newHarness(t, nil)
	h.Queues.ParkErr = errors.New("SQS down")
	e.fail(engine.Snooze(time.Second, "no send slot"))
	msg := testkit.Record(t, notifyJob(), 1)
	if failed := h.Run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want the record retried", failed)
	}

	h, e = newHarness(t, nil)
	env := notifyJob()
	h.Jobs.SetState(env.MessageID, jobs.StateCancelled)
	e.fail(engine.SnoozeParked(time.Minute, "quota"))
	if failed := h.Run(t, testkit.Record(t, env, 1)); len(failed) != 0 || len(h.Queues.ParkedMessages()) != 0 {
		t.Fatalf("failures %v, copies %v; a cancelled job is neither retried nor sent again", failed, h.Queues.ParkedMessages())
	}
}

// Permanent wins over a snooze it wraps, and a claim-then-effect type,
// whose claim is taken before its effect, cannot snooze: its effect failed
// after its claim and goes to the DLQ.
func TestSnoozeThatCannotBeHonoured(t *testing.T) {
	for name, tc := range map[string]struct {
		env message.Envelope
		err error
	}{
		"permanent":         {notifyJob(), engine.Permanent(engine.Snooze(time.Second, "x"))},
		"claim-then-effect": {testkit.EnvelopeFor(payout), engine.Snooze(time.Second, "x")},
	} {
		t.Run(name, func(t *testing.T) {
			h, e := newHarness(t, nil)
			e.fail(tc.err)
			msg := testkit.Record(t, tc.env, 1)
			h.Run(t, msg)
			if _, dead := h.Queues.DeadReason(msg.MessageId); !dead || len(h.Queues.ParkedMessages()) != 0 {
				t.Fatalf("dead-lettered %v, copies %v; want the DLQ and no copy", dead, h.Queues.ParkedMessages())
			}
		})
	}
}
