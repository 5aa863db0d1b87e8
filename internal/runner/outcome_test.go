package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestErrorClassAgreesWithTheOutcome: the errorClass of a record's outcome
// line agrees with its outcome. A dead-lettered record is never retried, so
// its class is a permanent one ("validation" for a message that cannot be
// understood, "permanent …" for anything else), never "transient"; a retry
// is never classed permanent; an outcome without an error has no class.
func TestErrorClassAgreesWithTheOutcome(t *testing.T) {
	unknown := notifyJob()
	unknown.Type = "test.notify.v9"
	unknownBody, _ := unknown.Encode()
	sesErr := obstest.SESRejection()
	for _, tc := range []struct {
		name    string
		msg     func(t *testing.T, h *testkit.Harness) events.SQSMessage
		err     error // the handler's answer
		outcome string
		class   string
	}{
		{"succeeded", func(t *testing.T, _ *testkit.Harness) events.SQSMessage { return testkit.Record(t, notifyJob(), 1) }, nil, "succeeded", ""},
		{"no-op", func(t *testing.T, _ *testkit.Harness) events.SQSMessage { return testkit.Record(t, notifyJob(), 1) },
			engine.NoOp("user not found"), "noop", ""},
		{"parked", func(t *testing.T, _ *testkit.Harness) events.SQSMessage {
			return testkit.Record(t, testkit.EnvelopeFor(digest), 1)
		}, nil, "parked", ""},
		{"retry", func(t *testing.T, _ *testkit.Harness) events.SQSMessage { return testkit.Record(t, notifyJob(), 1) },
			fmt.Errorf("email: send: %w", sesErr), "retry", "transient MessageRejected"},
		{"failed on the final attempt", func(t *testing.T, _ *testkit.Harness) events.SQSMessage { return testkit.Record(t, notifyJob(), 5) },
			errors.New("SES throttled"), "failed", "transient"},
		{"dead-lettered: poison", func(*testing.T, *testkit.Harness) events.SQSMessage { return testkit.RawRecord(`{"v":1}`, 1) },
			nil, "dead-lettered", "validation"},
		{"dead-lettered: not JSON", func(*testing.T, *testkit.Harness) events.SQSMessage { return testkit.RawRecord("hello", 1) },
			nil, "dead-lettered", "validation"},
		{"dead-lettered: unknown type", func(*testing.T, *testkit.Harness) events.SQSMessage {
			return testkit.RawRecord(string(unknownBody), 1)
		}, nil, "dead-lettered", "validation"},
		{"dead-lettered: the handler says permanent", func(t *testing.T, _ *testkit.Harness) events.SQSMessage {
			return testkit.Record(t, notifyJob(), 1)
		}, engine.Permanent(fmt.Errorf("email: send: %w", sesErr)), "dead-lettered", "permanent MessageRejected"},
		{"dead-lettered: effect failed after its claim", func(t *testing.T, _ *testkit.Harness) events.SQSMessage {
			return testkit.Record(t, testkit.EnvelopeFor(payout), 1)
		}, fmt.Errorf("email: send: %w", sesErr), "dead-lettered", "permanent MessageRejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, e := newHarness(t, nil)
			e.fail(tc.err)
			h.Run(t, tc.msg(t, h))
			var line map[string]any
			for _, l := range obstest.Lines(h.Logs.String()) {
				if l["msg"] == "job outcome" {
					line = l
				}
			}
			if line == nil {
				t.Fatalf("no outcome line:\n%s", h.Logs)
			}
			outcome, _ := line[obs.KeyOutcome].(string)
			class, _ := line["errorClass"].(string)
			if outcome != tc.outcome || class != tc.class {
				t.Errorf("outcome %q errorClass %q; want %q %q", outcome, class, tc.outcome, tc.class)
			}
			permanent := class == "validation" || strings.HasPrefix(class, "permanent")
			switch {
			case outcome == "dead-lettered" && !permanent:
				t.Errorf("a dead-lettered record classed %q: it is never retried", class)
			case outcome == "retry" && permanent:
				t.Errorf("a retried record classed %q", class)
			case line[obs.KeyError] == nil && class != "":
				t.Errorf("an outcome without an error classed %q", class)
			}
		})
	}
}

// ErrorClass and PermanentClass name each kind of error; PermanentClass
// never says transient.
func TestErrorClasses(t *testing.T) {
	sesErr := obstest.SESRejection()
	for _, tc := range []struct {
		name               string
		err                error
		class, permanentAs string
	}{
		{"none", nil, "", ""},
		{"plain", errors.New("boom"), "transient", "permanent"},
		{"provider code", fmt.Errorf("send: %w", sesErr), "transient MessageRejected", "permanent MessageRejected"},
		{"permanent", engine.Permanent(errors.New("bad")), "permanent", "permanent"},
		{"deadline", context.DeadlineExceeded, "deadline", "permanent"},
		{"busy", engine.ErrBusy, "busy", "permanent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engine.ErrorClass(tc.err); got != tc.class {
				t.Errorf("ErrorClass = %q; want %q", got, tc.class)
			}
			if got := engine.PermanentClass(tc.err); got != tc.permanentAs {
				t.Errorf("PermanentClass = %q; want %q", got, tc.permanentAs)
			}
		})
	}
}
