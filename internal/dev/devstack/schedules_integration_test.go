//go:build integration

package devstack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// emulatorWorld is moto's scheduler with a group and the work queues, and
// the emulator over them.
type emulatorWorld struct {
	client *scheduler.Client
	queues testenv.WorkQueues
	group  string
	emu    *Scheduler
}

func newEmulatorWorld(t *testing.T) *emulatorWorld {
	t.Helper()
	cfg := testenv.Moto(t).Config()
	w := &emulatorWorld{client: scheduler.NewFromConfig(cfg), group: testenv.Name(t, "g")}
	sqsClient := testenv.SQS(t)
	w.queues = testenv.CreateWorkQueues(t, sqsClient, testenv.Name(t, "q")+"-", 0)
	if _, err := w.client.CreateScheduleGroup(context.Background(), &scheduler.CreateScheduleGroupInput{Name: aws.String(w.group)}); err != nil {
		t.Fatal(err)
	}
	arns := map[string]message.Queue{}
	for q, v := range w.queues.Queues {
		arns[v.ARN] = q
	}
	w.emu = &Scheduler{Client: w.client, Sender: sqsqueue.New(sqsClient, w.queues.URLs(), ""), Queues: arns}
	return w
}

func (w *emulatorWorld) create(t *testing.T, name, expr, tz, input string, q message.Queue, deleteAfter bool) {
	t.Helper()
	in := &scheduler.CreateScheduleInput{
		Name: aws.String(name), GroupName: aws.String(w.group), ScheduleExpression: aws.String(expr),
		ScheduleExpressionTimezone: aws.String(tz), FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target: &schedtypes.Target{Arn: aws.String(w.queues.Queues[q].ARN), RoleArn: aws.String("arn:aws:iam::123456789012:role/scheduler"), Input: aws.String(input)},
	}
	if deleteAfter {
		in.ActionAfterCompletion = schedtypes.ActionAfterCompletionDelete
	}
	if _, err := w.client.CreateSchedule(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// A recurring schedule fires on its expression in its zone: its tick, the
// scheduled time and a new execution id filled in, with the type and
// correlation id attributes, once per firing however often the emulator
// looks, and not for a time before it first saw it.
func TestEmulatorFiresRecurringSchedulesOnTheirExpression(t *testing.T) {
	w := newEmulatorWorld(t)
	const tick = `{"v":1,"type":"email.partner-digest-fanout.v1","schedule":"weekly","scheduledTime":"<aws.scheduler.scheduled-time>","correlationId":"<aws.scheduler.execution-id>"}`
	w.create(t, "weekly", "cron(0 9 ? * MON *)", "Europe/Berlin", tick, contract.QueueBulk, false)
	c := &clock{now: time.Date(2026, 12, 7, 7, 59, 30, 0, time.UTC)} // Monday 08:59:30 in Berlin
	w.emu.Now = c.Now
	ctx := context.Background()
	if n := w.emu.Pass(ctx); n != 0 {
		t.Fatalf("fired %d before 09:00", n)
	}
	c.Set(time.Date(2026, 12, 7, 8, 0, 4, 0, time.UTC))
	if n := w.emu.Pass(ctx); n != 1 {
		t.Fatalf("fired %d at 09:00:04 Berlin time, want 1", n)
	}
	if n := w.emu.Pass(ctx); n != 0 {
		t.Fatalf("fired %d again in the same minute", n)
	}
	msgs := testenv.Receive(t, testenv.SQS(t), w.queues.Queues[contract.QueueBulk].URL, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages in the bulk queue, want 1", len(msgs))
	}
	got, err := message.DecodeTick([]byte(aws.ToString(msgs[0].Body)))
	if err != nil || got.ScheduledTime != "2026-12-07T08:00:00Z" || got.CorrelationID == "" || got.CorrelationID == "<aws.scheduler.execution-id>" {
		t.Fatalf("tick %+v %v", got, err)
	}
	// EventBridge Scheduler's SQS target sends the input alone: the local
	// scheduler sets no message attributes either.
	if a := msgs[0].MessageAttributes; len(a) != 0 {
		t.Fatalf("attributes %v; want none, as AWS sends none", a)
	}
	if _, err := w.client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("weekly"), GroupName: aws.String(w.group)}); err != nil {
		t.Fatalf("a recurring schedule is kept after it fired: %v", err)
	}
	c.Set(time.Date(2026, 12, 14, 8, 0, 1, 0, time.UTC)) // a week later
	if n := w.emu.Pass(ctx); n != 1 {
		t.Fatalf("fired %d the next Monday, want 1", n)
	}
}

// A one-time at() schedule created directly fires once at its time: its
// input goes to its queue as it is, and the schedule is deleted
// (ActionAfterCompletion DELETE). Real time, the emulator polling.
func TestEmulatorFiresAnAtScheduleAndDeletesIt(t *testing.T) {
	w := newEmulatorWorld(t)
	w.emu.Poll = 500 * time.Millisecond
	env := message.Envelope{V: 1, MessageID: message.NewMessageID(), Type: "email.welcome.v1", Key: "welcome:u-demo-2",
		CorrelationID: "c-at", Args: map[string]string{"userId": "u-demo-2"}, EnqueuedAt: time.Now().UTC()}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
	w.create(t, env.MessageID, "at("+at.Format("2006-01-02T15:04:05")+")", "UTC", string(body), contract.QueueDefault, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.emu.Run(ctx)
	sqsClient := testenv.SQS(t)
	var got string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && got == ""; {
		for _, m := range testenv.Receive(t, sqsClient, w.queues.Queues[contract.QueueDefault].URL, time.Second) {
			got = aws.ToString(m.Body)
		}
	}
	if got != string(body) {
		t.Fatalf("received %q, want the schedule's input %s", got, body)
	}
	if arrived := time.Now(); arrived.Before(at) {
		t.Fatalf("fired before its time (%s < %s)", arrived, at)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := w.client.GetSchedule(context.Background(), &scheduler.GetScheduleInput{Name: aws.String(env.MessageID), GroupName: aws.String(w.group)})
		if schedule.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the at() schedule was not deleted after it fired: %v", err)
		}
	}
}

// A schedule whose target refuses its input reaches the schedule's
// dead-letter queue as EventBridge Scheduler sends it there: the input as
// the body, and the scheduler's attributes (the error code, no retries,
// the schedule's and the target's ARNs), which the dlq function reads
// (schedule.LetterOf). Two refusals: a target that is no work queue of the
// stack, and a work queue that no longer exists (SQS's own answer). A
// one-time schedule is then done, and deleted.
func TestEmulatorDeadLettersWhatItsTargetRefuses(t *testing.T) {
	w := newEmulatorWorld(t)
	sqsClient := testenv.SQS(t)
	dlq := testenv.NewQueue(t, sqsClient, "sched-dlq", nil)
	gone := testenv.NewQueue(t, sqsClient, "gone", nil)
	w.emu.DeadLetters, w.emu.DLQURLs = sqsClient, map[string]string{dlq.ARN: dlq.URL}
	// gone is a work queue as far as the emulator knows, then deleted.
	w.emu.Queues[gone.ARN] = "gone"
	w.emu.Sender = sqsqueue.New(sqsClient, map[string]string{"gone": gone.URL}, "")
	if _, err := sqsClient.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(gone.URL)}); err != nil {
		t.Fatal(err)
	}
	const tick = `{"v":1,"type":"email.partner-digest-fanout.v1","schedule":"weekly","scheduledTime":"<aws.scheduler.scheduled-time>","correlationId":"<aws.scheduler.execution-id>"}`
	ctx := context.Background()
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	for name, target := range map[string]string{"elsewhere": "arn:aws:sqs:us-east-1:123456789012:not-this-stack", "deleted": gone.ARN} {
		_, err := w.client.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
			Name: aws.String(name), GroupName: aws.String(w.group), ScheduleExpression: aws.String("at(" + at.Format("2006-01-02T15:04:05") + ")"),
			FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff}, ActionAfterCompletion: schedtypes.ActionAfterCompletionDelete,
			Target: &schedtypes.Target{Arn: aws.String(target), RoleArn: aws.String("arn:aws:iam::123456789012:role/scheduler"), Input: aws.String(tick),
				DeadLetterConfig: &schedtypes.DeadLetterConfig{Arn: aws.String(dlq.ARN)}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := w.emu.Pass(ctx); n != 2 {
		t.Fatalf("%d firings done, want 2 (each dead-lettered)", n)
	}
	var letters []sqstypes.Message
	for len(letters) < 2 {
		more := testenv.Receive(t, sqsClient, dlq.URL, time.Second)
		if len(more) == 0 {
			t.Fatalf("%d letters in the schedule's DLQ, want 2", len(letters))
		}
		letters = append(letters, more...)
	}
	codes := map[string]string{}
	for _, m := range letters {
		attrs := map[string]string{}
		for k, v := range m.MessageAttributes {
			attrs[k] = aws.ToString(v.StringValue)
		}
		l, ok := schedule.LetterOf(attrs)
		if !ok || l.Group != w.group || l.Retries != 0 || l.Exhausted != "" || attrs[schedule.AttrErrorMessage] == "" {
			t.Fatalf("letter attributes %v (%+v); want the scheduler's", attrs, l)
		}
		if !strings.Contains(aws.ToString(m.Body), `"schedule":"weekly"`) || strings.Contains(aws.ToString(m.Body), "<aws.scheduler") {
			t.Fatalf("body %s; want the input, its placeholders filled", aws.ToString(m.Body))
		}
		codes[l.Schedule] = l.Code
	}
	if codes["elsewhere"] != "AWS.SimpleQueueService.NonExistentQueue" || codes["deleted"] == "" || codes["deleted"] == schedule.UnknownCode {
		t.Fatalf("codes %v; want SQS's code for each refusal", codes)
	}
	for name := range codes {
		if _, err := w.client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(w.group)}); !schedule.IsNotFound(err) {
			t.Errorf("one-time schedule %s still there after it was dead-lettered: %v", name, err)
		}
	}
}
