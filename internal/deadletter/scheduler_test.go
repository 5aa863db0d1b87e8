package deadletter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

const (
	defaultQueueARN = "arn:aws:sqs:us-east-1:123456789012:runstwice-test-default"
	bulkQueueARN    = "arn:aws:sqs:us-east-1:123456789012:runstwice-test-bulk"
	// secret is ERROR_MESSAGE's free text: it must leave the process nowhere.
	secret = "message rejected for bob@example.com"
)

// tickBody is the tick the template's weekly schedule sends.
const tickBody = `{"v":1,"type":"email.partner-digest-fanout.v1","schedule":"partner-digest-weekly","scheduledTime":"2026-11-30T09:00:00Z","correlationId":"exec-1"}`

// schedulerLetter is a message EventBridge Scheduler sent to the DLQ
// because it could not deliver body, with the attributes it sets.
func schedulerLetter(body string, attrs map[string]string) events.SQSMessage {
	msg := testkit.RawRecord(body, 1)
	msg.MessageAttributes = map[string]events.SQSMessageAttribute{}
	for k, v := range attrs {
		msg.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: aws.String(v), DataType: "String"}
	}
	return msg
}

func schedulerAttrs(scheduleARN, targetARN, code, retries, exhausted string) map[string]string {
	a := map[string]string{
		schedule.AttrErrorCode: code, schedule.AttrErrorMessage: secret, schedule.AttrRetryAttempts: retries,
		schedule.AttrScheduleARN: scheduleARN, schedule.AttrTargetARN: targetARN,
		schedule.AttrScheduledTime: "2026-11-30T09:00:00Z", schedule.AttrExecutionID: "exec-1", schedule.AttrPayloadTruncated: "false",
	}
	if exhausted != "" {
		a[schedule.AttrExhaustedRetryCondition] = exhausted
	}
	return a
}

// A message EventBridge Scheduler could not deliver (a one-time job's
// envelope, a recurring schedule's tick) is recorded as what it is: the
// scheduler's error code as its reason (never ERROR_MESSAGE, the provider's
// free text), its delivery tries (RETRY_ATTEMPTS + 1) as its attempts, the
// target queue as its source, the job the worker would have run (a tick's
// derived job, of the tick's type), named by its schedule; and the job is
// marked Failed with class "scheduler <code>".
func TestSchedulerLettersAreRecordedAsWhatTheyAre(t *testing.T) {
	welcome := envelope(contract.Welcome.Name)
	welcomeBody, _ := welcome.Encode()
	tick, _ := message.DecodeTick([]byte(tickBody))
	tickEnv, err := contract.Registry().TickEnvelope(tick)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                     string
		msg                      events.SQSMessage
		wantID, wantType         string
		wantSchedule, wantSource string
		wantReason               []string
		wantAttempts             int
		wantClass                string
	}{
		{
			name: "one-time job, retries ran out",
			msg: schedulerLetter(string(welcomeBody), schedulerAttrs(
				"arn:aws:scheduler:us-east-1:123456789012:schedule/runstwice-test-jobs/"+welcome.MessageID, defaultQueueARN,
				"AWS.Scheduler.InternalServerError", "185", "MaximumRetryAttempts")),
			wantID: welcome.MessageID, wantType: contract.Welcome.Name, wantSchedule: welcome.MessageID, wantSource: defaultQueueARN,
			wantReason:   []string{"EventBridge Scheduler could not deliver it", "AWS.Scheduler.InternalServerError", "185 retries", "MaximumRetryAttempts"},
			wantAttempts: 186, wantClass: "scheduler AWS.Scheduler.InternalServerError",
		},
		{
			name: "tick, not retried",
			msg: schedulerLetter(tickBody, schedulerAttrs(
				"arn:aws:scheduler:us-east-1:123456789012:schedule/runstwice-test-recurring/partner-digest-weekly", bulkQueueARN,
				"AWS.SimpleQueueService.NonExistentQueue", "0", "")),
			wantID: tickEnv.MessageID, wantType: contract.Fanout.Name, wantSchedule: "partner-digest-weekly", wantSource: bulkQueueARN,
			wantReason:   []string{"AWS.SimpleQueueService.NonExistentQueue", "not retried"},
			wantAttempts: 1, wantClass: "scheduler AWS.SimpleQueueService.NonExistentQueue",
		},
		{
			name: "a code that is no code, a target that is no queue",
			msg: schedulerLetter(string(welcomeBody), schedulerAttrs("not an arn", "arn:aws:lambda:us-east-1:123456789012:function:x",
				"<bob@example.com>", "x", "")),
			wantID: welcome.MessageID, wantType: contract.Welcome.Name, wantSource: "default",
			wantReason: []string{"could not deliver it to its queue: unknown"}, wantAttempts: 1, wantClass: "scheduler unknown",
		},
		{
			name:   "tick moved by the redrive policy",
			msg:    testkit.RawRecord(tickBody, 6),
			wantID: tickEnv.MessageID, wantType: contract.Fanout.Name, wantSchedule: "partner-digest-weekly", wantSource: "bulk",
			wantReason: []string{"exceeded maxReceiveCount (5 receives)"}, wantAttempts: 5, wantClass: deadletter.ClassMaxReceives,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if f := h.run(t, tc.msg); len(f) != 0 {
				t.Fatalf("failures %v", f)
			}
			rec, ok := h.records.recs[tc.wantID]
			if !ok {
				t.Fatalf("no record under %s; have %+v", tc.wantID, h.records.recs)
			}
			if rec.Type != tc.wantType || rec.Schedule != tc.wantSchedule || !strings.HasPrefix(rec.SourceQueue, tc.wantSource) ||
				rec.ReceiveCount != tc.wantAttempts || rec.JobID != tc.wantID || rec.Status != deadletter.StatusDead {
				t.Errorf("record %+v; want type %s, schedule %q, source %s, attempts %d, dead", rec, tc.wantType, tc.wantSchedule, tc.wantSource, tc.wantAttempts)
			}
			for _, w := range tc.wantReason {
				if !strings.Contains(rec.Reason, w) {
					t.Errorf("reason %q lacks %q", rec.Reason, w)
				}
			}
			if strings.Contains(rec.Reason, "maxReceiveCount") != (tc.wantClass == deadletter.ClassMaxReceives) {
				t.Errorf("reason %q: a scheduler's letter is never a redrive move", rec.Reason)
			}
			f, _ := h.jobs.Failure(tc.wantID)
			if f.Class != tc.wantClass || f.Attempts != tc.wantAttempts || f.Reason != rec.Reason {
				t.Errorf("job marked %+v; want class %q, attempts %d, the letter's reason", f, tc.wantClass, tc.wantAttempts)
			}
			if strings.Contains(rec.Reason, "bob@") || strings.Contains(h.logs.String(), "bob@") {
				t.Errorf("the scheduler's free text left the process: reason %q, logs %s", rec.Reason, h.logs)
			}
		})
	}
}

// sends records what a redrive sends.
type sends struct{ msgs []sqsqueue.Message }

func (s *sends) Send(_ context.Context, m sqsqueue.Message) error {
	s.msgs = append(s.msgs, m)
	return nil
}

// jobctl dlq redrive sends both kinds of scheduler letter: a one-time job's
// envelope back to its type's queue, and a tick back to its type's queue as
// the same tick (the worker derives the same job from it), its FAILED
// marker reset first.
func TestSchedulerLettersAreRedrivable(t *testing.T) {
	welcome := envelope(contract.Welcome.Name)
	welcomeBody, _ := welcome.Encode()
	tick, _ := message.DecodeTick([]byte(tickBody))
	tickEnv, _ := contract.Registry().TickEnvelope(tick)
	for _, tc := range []struct {
		name, id, body string
		queue          message.Queue
		typ            string
	}{
		{"one-time job", welcome.MessageID, string(welcomeBody), contract.QueueDefault, contract.Welcome.Name},
		{"tick", tickEnv.MessageID, tickBody, contract.QueueBulk, contract.Fanout.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace := &enginetest.Trace{}
			letters := &fakeLetters{trace: trace, rec: deadletter.Record{ID: tc.id, JobID: tc.id, Type: tc.typ, Body: tc.body, Status: deadletter.StatusDead}}
			out := &sends{}
			r := deadletter.NewRedriver(letters, out, contract.Registry())
			r.Jobs, r.Markers = &fakeLifecycle{trace: trace, rv: jobs.Revival{JobID: tc.id}}, fakeResetter{trace: trace}
			res, err := r.Redrive(context.Background(), tc.id)
			if err != nil || res.Outcome != deadletter.Redrove || res.Queue != tc.queue {
				t.Fatalf("redrive %+v, %v; want redriven to %s", res, err, tc.queue)
			}
			if len(out.msgs) != 1 || out.msgs[0].Body != tc.body || out.msgs[0].Queue != string(tc.queue) || out.msgs[0].Type != tc.typ {
				t.Fatalf("sent %+v; want the body as it is to %s, type %s", out.msgs, tc.queue, tc.typ)
			}
			if got := trace.String(); got != "inspect reset-marker mark-redriven" {
				t.Errorf("calls %s; want inspect reset-marker mark-redriven", got)
			}
		})
	}
	// A tick of a schedule that names no tick type cannot go back.
	bad := strings.Replace(tickBody, "email.partner-digest-fanout.v1", "email.welcome.v1", 1)
	letters := &fakeLetters{trace: &enginetest.Trace{}, rec: deadletter.Record{ID: "x", Body: bad, Status: deadletter.StatusDead}}
	r := deadletter.NewRedriver(letters, &sends{}, contract.Registry())
	if _, err := r.Redrive(context.Background(), "x"); !errors.Is(err, deadletter.ErrNotRedrivable) || !strings.Contains(err.Error(), "partner-digest-weekly") {
		t.Fatalf("redrive of a tick of a non-tick type: %v; want ErrNotRedrivable naming its schedule", err)
	}
}
