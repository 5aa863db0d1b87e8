package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// The runner's reasons for a retry (internal/runner: fail and Handle).
const (
	reasonInterrupted = "interrupted by the invocation's deadline"
	reasonNotStarted  = "the invocation's deadline came first"
	reasonFailed      = "attempt 1 of 5 failed; SQS retries it"
)

// A mail sent during an invocation that came back with its job retried
// because the invocation's deadline came first is explained; nothing else
// about such a retry is. Each case changes one thing of the first.
func TestLedgerExplainsADeadlineRetryAfterTheEffect(t *testing.T) {
	// The job mails at 3 s, during an invocation of email from 2 s to 4 s
	// whose outcome line for it (at 3.5 s) is a retry; its retry mails
	// again at 20 s.
	type scene struct {
		start  time.Duration // the invocation's start (it ends at 4 s)
		mailAt time.Duration
		// askedAt, when set, is when the mail's request reached the proxy
		// (mailAt is when SES answered it).
		askedAt    time.Duration
		callerGone bool
		lost       bool
		outcomeOf  string // the job the outcome line names ("" for the mailing job)
		function   string
		reason     string
		loggedAt   time.Duration
		claimAt    time.Duration // a claim of the job applied (0: none)
	}
	base := scene{start: 2 * time.Second, mailAt: 3 * time.Second, function: "email", reason: reasonInterrupted, loggedAt: 3500 * time.Millisecond}
	cases := []struct {
		name   string
		change func(*scene)
		extra  bool           // the second mail is left unexplained
		want   map[string]int // the ledger's explained figures
	}{
		{"interrupted after the mail", func(*scene) {}, false, map[string]int{whyDeadline: 1}},
		{"the record never started", func(s *scene) { s.reason = reasonNotStarted }, false, map[string]int{whyDeadline: 1}},
		{"the line written just before the invocation", func(s *scene) { s.start, s.loggedAt = 2*time.Second+time.Millisecond, 2*time.Second }, true, map[string]int{}},
		{"mail before the invocation", func(s *scene) { s.mailAt = 1500 * time.Millisecond }, true, map[string]int{}},
		{"mail after the invocation", func(s *scene) { s.mailAt = 5 * time.Second }, true, map[string]int{}},
		{"another job of the batch interrupted", func(s *scene) { s.outcomeOf = "other-job" }, true, map[string]int{}},
		{"a plain failure's retry", func(s *scene) { s.reason = reasonFailed }, true, map[string]int{}},
		{"the line of another invocation", func(s *scene) { s.loggedAt = 10 * time.Second }, true, map[string]int{}},
		{"the line of another function", func(s *scene) { s.function = "dlq" }, true, map[string]int{}},
		{"a twin claimed after the mail", func(s *scene) { s.claimAt = 3700 * time.Millisecond }, true, map[string]int{}},
		{"the mail's answer already lost", func(s *scene) { s.callerGone = true }, false, map[string]int{whyLostResponse: 1}},
		{"the invocation lost", func(s *scene) { s.lost = true }, false, map[string]int{whyKilled: 1}},
		// A process killed mid-send: its request finishes upstream after
		// the invocation is gone, before the proxy sees the caller gone.
		{"the invocation lost while SES answered", func(s *scene) { s.lost, s.askedAt, s.mailAt = true, 3*time.Second, 4500*time.Millisecond },
			false, map[string]int{whyKilled: 1}},
		{"a mail asked for after the lost invocation", func(s *scene) { s.lost, s.askedAt, s.mailAt = true, 4200*time.Millisecond, 4500*time.Millisecond },
			true, map[string]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.change(&s)
			w := newWorld(t)
			id := w.job(client.TypeWelcome, client.StateSucceeded).JobID
			w.mail(id, s.mailAt)
			w.truth.Sends[0].CallerGone = s.callerGone
			if s.askedAt > 0 {
				w.truth.Sends[0].Began = w.at.Add(s.askedAt)
			}
			w.mail(id, 20*time.Second)
			of := id
			if s.outcomeOf != "" {
				of = s.outcomeOf
			}
			w.truth.Seen.Calls = []invocation{{Function: "email", Start: w.at.Add(s.start), End: w.at.Add(4 * time.Second),
				JobIDs: []string{id, "other-job"}, Lost: s.lost}}
			w.truth.Seen.Outcomes[of] = []outcome{{Line: devstack.Outcome{Outcome: "retry", Reason: s.reason, JobID: of, Function: s.function},
				At: w.at.Add(s.loggedAt)}}
			if s.claimAt > 0 {
				w.truth.Claims = []claim{{JobID: id, Time: w.at.Add(s.claimAt)}}
			}
			l := w.ledger(nil)
			if _, extra := broken(l)[InvExtra]; extra != tc.extra {
				t.Errorf("second mail unexplained: %v; want %v", extra, tc.extra)
			}
			if !maps.Equal(l.Figures.Explained, tc.want) {
				t.Errorf("explained %v; want %v", l.Figures.Explained, tc.want)
			}
		})
	}
}

// What the real runner writes when a delivery's context ends after its
// mail went out is what the ledger explains, through the observer's own
// record of the invocation and its outcome line; a plain failure's retry
// is not.
func TestLedgerExplainsTheRunnersDeadlineRetry(t *testing.T) {
	cases := []struct {
		name  string
		after func(ctx context.Context) error // what the handler's send returns once SES has the mail
		extra bool
	}{
		{"the context ends before the answer is read", func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("send: %w", ctx.Err())
		}, false},
		{"the send fails", func(context.Context) error { return errors.New("send: connection reset") }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			id := w.job(client.TypeWelcome, client.StateSucceeded).JobID
			o := newObserver()
			jt := message.JobType{Name: "test.mail.v1", Args: []message.ArgSpec{{Name: "userId", Format: message.FormatID, Required: true}},
				Queue: contract.QueueDefault, EnabledByDefault: true, Lease: true, KeyPrefix: "mail", KeyArgs: []string{"userId"}}
			reg, err := message.NewRegistry(jt)
			if err != nil {
				t.Fatal(err)
			}
			send := runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
				w.mailAt(job.Envelope.MessageID, time.Now()) // SES accepted it
				return tc.after(ctx)
			})
			q := &testkit.Queues{}
			r, err := runner.New(runner.Config{Registry: reg, Handlers: map[string]runner.Handler{jt.Name: send},
				Switch: &testkit.Switches{}, Markers: memstore.New(), Parker: q, DeadLetterer: q, MaxReceiveCount: 5,
				DeadlineMargin: 200 * time.Millisecond, Logger: obs.NewLogger(o, "info").With(obs.KeyFunction, "email")})
			if err != nil {
				t.Fatal(err)
			}
			env := testkit.EnvelopeFor(jt)
			env.MessageID = id
			payload, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{testkit.Record(t, env, 1)}})
			if err != nil {
				t.Fatal(err)
			}
			fn := o.wrap("email", invokerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
				var ev events.SQSEvent
				if err := json.Unmarshal(payload, &ev); err != nil {
					return nil, err
				}
				ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				resp, err := r.Handle(ctx, ev)
				if err != nil {
					return nil, err
				}
				return json.Marshal(resp)
			}))
			out, err := fn.Invoke(context.Background(), payload)
			if err != nil {
				t.Fatal(err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 1 {
				t.Fatalf("response %s (%v); want the record retried", out, err)
			}
			w.mailAt(id, time.Now().Add(time.Minute)) // the retry mails again
			w.truth.Seen = o.snapshot()

			l := w.ledger(nil)
			if _, extra := broken(l)[InvExtra]; extra != tc.extra {
				t.Errorf("second mail unexplained: %v; want %v (outcomes %+v)", extra, tc.extra, w.truth.Seen.Outcomes[id])
			}
			if got, want := l.Figures.Explained[whyDeadline], map[bool]int{false: 1, true: 0}[tc.extra]; got != want {
				t.Errorf("explained by a deadline retry: %d; want %d", got, want)
			}
		})
	}
}
