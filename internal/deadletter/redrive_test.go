package deadletter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

func TestFilterMatch(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	rec := deadletter.Record{ID: "a", Type: contract.Welcome.Name, Status: deadletter.StatusDead,
		Reason: "permanent: SES MessageRejected", LastSeen: t0}
	for _, tc := range []struct {
		name string
		f    deadletter.Filter
		want bool
	}{
		{"empty selects all", deadletter.Filter{}, true},
		{"status", deadletter.Filter{Status: deadletter.StatusDead}, true},
		{"other status", deadletter.Filter{Status: deadletter.StatusRedriven}, false},
		{"type", deadletter.Filter{Type: contract.Welcome.Name}, true},
		{"type is exact, not a prefix", deadletter.Filter{Type: "email.welcome"}, false},
		{"other type", deadletter.Filter{Type: contract.PasswordReset.Name}, false},
		{"since before", deadletter.Filter{Since: t0.Add(-time.Second)}, true},
		{"since exactly", deadletter.Filter{Since: t0}, true},
		{"since after", deadletter.Filter{Since: t0.Add(time.Second)}, false},
		{"reason substring, any case", deadletter.Filter{Reason: "messagerejected"}, true},
		{"reason absent", deadletter.Filter{Reason: "maxReceiveCount"}, false},
		{"all together", deadletter.Filter{Status: deadletter.StatusDead, Type: contract.Welcome.Name, Since: t0, Reason: "SES"}, true},
		{"all but one", deadletter.Filter{Status: deadletter.StatusDead, Type: contract.Welcome.Name, Since: t0, Reason: "SMTP"}, false},
	} {
		if got := tc.f.Match(rec); got != tc.want {
			t.Errorf("%s: Match = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// fakeLetters is a one-letter table.
type fakeLetters struct {
	trace *enginetest.Trace
	rec   deadletter.Record
}

func (f *fakeLetters) Get(context.Context, string) (deadletter.Record, error) { return f.rec, nil }
func (f *fakeLetters) Select(context.Context, deadletter.Filter) ([]deadletter.Record, error) {
	return []deadletter.Record{f.rec}, nil
}
func (f *fakeLetters) MarkRedriven(context.Context, string) error {
	f.trace.Add("mark-redriven")
	return nil
}
func (f *fakeLetters) MarkDropped(context.Context, string) error {
	f.trace.Add("mark-dropped")
	return nil
}

type fakeLifecycle struct {
	trace *enginetest.Trace
	rv    jobs.Revival
}

func (f *fakeLifecycle) Inspect(context.Context, string) (jobs.Revival, error) {
	f.trace.Add("inspect")
	return f.rv, nil
}

func (f *fakeLifecycle) Reactivate(_ context.Context, _ jobs.Revival, keep bool) error {
	if keep {
		f.trace.Add("reactivate-keeping-owner")
	} else {
		f.trace.Add("reactivate")
	}
	return nil
}

func (f *fakeLifecycle) Settle(_ context.Context, _ string, sent bool) error {
	if sent {
		f.trace.Add("settle-sent")
	} else {
		f.trace.Add("settle-unsent")
	}
	return nil
}

func (f *fakeLifecycle) MarkDropped(context.Context, string) error {
	f.trace.Add("mark-dropped")
	return nil
}

type fakeResetter struct{ trace *enginetest.Trace }

func (f fakeResetter) ResetFailed(context.Context, engine.Key) error {
	f.trace.Add("reset-marker")
	return nil
}

type fakeSender struct {
	trace *enginetest.Trace
	err   error
}

func (f fakeSender) Send(context.Context, sqsqueue.Message) error {
	f.trace.Add("send")
	return f.err
}

// TestRedriveOrder pins the order the crash analysis in RedriveRecord relies
// on: nothing is written before the job is read; the marker is reset and the
// record reactivated before the send; the record is settled after it; the
// letter is marked last.
func TestRedriveOrder(t *testing.T) {
	env := message.Envelope{V: 1, MessageID: message.NewMessageID(), Type: contract.Welcome.Name, Key: "welcome:u-1",
		CorrelationID: "c", Args: map[string]string{"userId": "u-1"}, EnqueuedAt: time.Now().UTC()}
	body, _ := env.Encode()
	failed := jobs.Revival{JobID: env.MessageID, Found: true, State: jobs.StateFailed}
	for _, tc := range []struct {
		name    string
		rv      jobs.Revival
		opts    deadletter.Options
		sendErr error
		outcome deadletter.Outcome
		ops     []string
	}{
		{"redrive", failed, deadletter.Options{}, nil, deadletter.Redrove,
			[]string{"inspect", "reset-marker", "reactivate", "send", "settle-sent", "mark-redriven"}},
		{"send fails", failed, deadletter.Options{}, errors.New("sqs down"), deadletter.Failed,
			[]string{"inspect", "reset-marker", "reactivate", "send", "settle-unsent"}},
		{"dry run", failed, deadletter.Options{DryRun: true}, nil, deadletter.WouldRedrive, []string{"inspect"}},
		{"superseded", jobs.Revival{JobID: env.MessageID, Found: true, State: jobs.StateFailed, SupersededBy: "newer"},
			deadletter.Options{}, nil, deadletter.Superseded, []string{"inspect"}},
		{"superseded, forced", jobs.Revival{JobID: env.MessageID, Found: true, State: jobs.StateFailed, SupersededBy: "newer"},
			deadletter.Options{Force: true}, nil, deadletter.Redrove,
			[]string{"inspect", "reset-marker", "reactivate-keeping-owner", "send", "settle-sent", "mark-redriven"}},
		{"no job record", jobs.Revival{JobID: env.MessageID}, deadletter.Options{}, nil, deadletter.Redrove,
			[]string{"inspect", "reset-marker", "send", "mark-redriven"}},
		{"cancelled job", jobs.Revival{JobID: env.MessageID, Found: true, State: "Cancelled"}, deadletter.Options{}, nil,
			deadletter.Skipped, []string{"inspect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace := &enginetest.Trace{}
			letters := &fakeLetters{trace: trace, rec: deadletter.Record{ID: env.MessageID, JobID: env.MessageID, Type: env.Type,
				Body: string(body), Status: deadletter.StatusDead}}
			r := deadletter.NewRedriver(letters, fakeSender{trace: trace, err: tc.sendErr}, contract.Registry())
			r.Jobs, r.Markers = &fakeLifecycle{trace: trace, rv: tc.rv}, fakeResetter{trace: trace}
			res, err := r.RedriveWith(context.Background(), env.MessageID, tc.opts)
			if err != nil {
				res.Outcome = deadletter.Failed
			}
			if res.Outcome != tc.outcome {
				t.Errorf("outcome %s (%v); want %s", res.Outcome, err, tc.outcome)
			}
			if got := trace.String(); got != strings.Join(tc.ops, " ") {
				t.Errorf("calls %v; want %v", got, tc.ops)
			}
		})
	}
}
