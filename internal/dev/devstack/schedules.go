package devstack

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// SchedulerAPI is the part of the EventBridge Scheduler client the emulator
// uses.
type SchedulerAPI interface {
	schedule.ListAPI
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Sender sends a fired schedule's input to its queue (sqsqueue.Sender).
type Sender interface {
	Send(ctx context.Context, m sqsqueue.Message) error
}

// DeadLetterSender sends what the emulator could not deliver to a
// schedule's dead-letter queue, with the scheduler's attributes (the SQS
// client is one).
type DeadLetterSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// DefaultSchedulerPoll is how often the emulator looks at the schedules.
const DefaultSchedulerPoll = 5 * time.Second

// maxCatchUp bounds the firings of one schedule in one pass: a stack that
// slept (a laptop's lid closed) fires what it missed up to this, not a
// night of rate(1 minute).
const maxCatchUp = 10

// Scheduler emulates EventBridge Scheduler on moto, which keeps schedules
// but never fires them: every Poll it reads every schedule and fires those
// due since it last looked, as the service does — the target input sent to
// the target queue (a recurring schedule's placeholders filled in: the
// scheduled time, a new execution id), with the message attributes every job
// message carries, then a one-time schedule with ActionAfterCompletion
// DELETE deleted. A recurring schedule first seen fires from then on (not
// for times before); a one-time schedule fires once its time has come,
// however late. A send that fails in transit is tried again at the next
// pass; a target that refuses it (a queue that is not one of the stack's
// work queues, an SQS error answer) gets it sent to the schedule's
// dead-letter queue with the attributes EventBridge Scheduler sets
// (ERROR_CODE, ERROR_MESSAGE, RETRY_ATTEMPTS 0 as for an error it does not
// retry, SCHEDULE_ARN, TARGET_ARN, …), and the firing counts as done.
type Scheduler struct {
	Client SchedulerAPI
	Sender Sender
	// Queues maps a target ARN to its work queue.
	Queues map[string]message.Queue
	// DeadLetters sends to the dead-letter queues of DLQURLs (by ARN); nil:
	// a refused input is only logged, and tried again at the next pass.
	DeadLetters DeadLetterSender
	DLQURLs     map[string]string
	// Poll is how often it looks (DefaultSchedulerPoll if 0).
	Poll   time.Duration
	Logger *slog.Logger
	// Now is the clock (time.Now if nil).
	Now func() time.Time

	seen map[string]seenSchedule
}

// seenSchedule is what the emulator remembers of a schedule: its expression
// (a changed one starts afresh) and up to when it has fired it.
type seenSchedule struct {
	expr    string
	checked time.Time
}

// NewScheduler returns the emulator of the stack's schedules, sending
// through sqs to the stack's work queues.
func NewScheduler(client SchedulerAPI, sqs sqsqueue.API, st *stack.Stack, logger *slog.Logger) *Scheduler {
	urls, arns := map[message.Queue]string{}, map[string]message.Queue{}
	for _, q := range contract.Queues {
		if p, ok := st.Physical(strings.ToUpper(string(q[:1])) + string(q[1:]) + "Queue"); ok {
			urls[q], arns[p.ARN] = p.URL, q
		}
	}
	dlqs := map[string]string{}
	if p, ok := st.Physical("DeadLetterQueue"); ok {
		dlqs[p.ARN] = p.URL
	}
	return &Scheduler{Client: client, Sender: sqsqueue.New(sqs, envvar.ByName(urls), ""), Queues: arns, Logger: logger, DeadLetters: sqs, DLQURLs: dlqs}
}

// Run fires due schedules every Poll until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	poll := s.Poll
	if poll <= 0 {
		poll = DefaultSchedulerPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		s.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Scheduler) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Pass fires every schedule due now and returns how many firings it sent.
func (s *Scheduler) Pass(ctx context.Context) int {
	now := s.now()
	all, err := schedule.List(ctx, s.Client)
	if err != nil {
		if ctx.Err() == nil {
			s.log().Warn("scheduler: list schedules", "error", err)
		}
		return 0
	}
	if s.seen == nil {
		s.seen = map[string]seenSchedule{}
	}
	// One-time schedules first: a firing and a sweep tick due in one pass
	// (a stack that slept, a chaos campaign's jump) reach their queues in
	// the order of their times, not of the list.
	slices.SortStableFunc(all, func(a, b schedule.Schedule) int {
		return cmp.Compare(kindOrder(a), kindOrder(b))
	})
	live := map[string]bool{}
	sent := 0
	for _, sc := range all {
		key := sc.Group + "/" + sc.Name
		live[key] = true
		if sc.Expr == nil {
			continue // the service would have refused it
		}
		seen, ok := s.seen[key]
		if !ok || seen.expr != sc.Expression+" "+sc.Timezone {
			seen = seenSchedule{expr: sc.Expression + " " + sc.Timezone, checked: now}
			if sc.Expr.Kind == schedule.KindAt {
				seen.checked = time.Time{} // a one-time schedule fires however late
			}
		}
		fired := 0
		for fired < maxCatchUp {
			at, due := sc.Next(seen.checked)
			if !due || at.After(now) {
				break
			}
			if !s.fire(ctx, sc, at) {
				break
			}
			fired++
			seen.checked = at
			if sc.DeleteAfter {
				s.delete(ctx, sc)
				break
			}
		}
		if fired == maxCatchUp {
			seen.checked = now // more missed than it catches up: from now on
		}
		sent += fired
		s.seen[key] = seen
	}
	for key := range s.seen {
		if !live[key] {
			delete(s.seen, key)
		}
	}
	return sent
}

// kindOrder orders a one-time schedule before a recurring one.
func kindOrder(sc schedule.Schedule) int {
	if sc.Expr != nil && sc.Expr.Kind == schedule.KindAt {
		return 0
	}
	return 1
}

// fire sends sc's input for its firing at at, and reports whether it went.
func (s *Scheduler) fire(ctx context.Context, sc schedule.Schedule, at time.Time) bool {
	log := s.log().With("schedule", sc.Group+"/"+sc.Name, "scheduledTime", at.UTC().Format(message.TickTimeLayout))
	exec := uuid.NewString()
	body := sc.Fill(at, exec)
	q, ok := s.Queues[sc.TargetARN]
	if !ok {
		// SQS has no such queue here: what it answers for one it does not have.
		return s.deadLetter(ctx, log, sc, at, exec, body, "AWS.SimpleQueueService.NonExistentQueue",
			"the local scheduler's target is not a work queue of this stack")
	}
	// The body alone, as EventBridge Scheduler's SQS target sends it: no
	// message attributes, so nothing local leans on ones AWS never sets.
	// The type is read for the log line only.
	var jobType string
	if message.IsTick([]byte(body)) {
		if t, err := message.DecodeTick([]byte(body)); err == nil {
			jobType = t.Type
		}
	} else if env, err := message.Decode([]byte(body)); err == nil {
		jobType = env.Type
	}
	if err := s.Sender.Send(ctx, sqsqueue.Message{Queue: string(q), Body: body}); err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorFault() != smithy.FaultServer && !strings.Contains(api.ErrorCode(), "Throttl") && ctx.Err() == nil {
			// Refused (no such queue, access denied, a key it may not use):
			// the service does not retry that.
			return s.deadLetter(ctx, log, sc, at, exec, body, api.ErrorCode(), "the target queue refused the message")
		}
		log.Warn("scheduler: send failed; tried again at the next pass", "error", err)
		return false
	}
	log.Info("scheduler: fired", "queue", string(q), "type", jobType)
	return true
}

// delete removes a one-time schedule after it fired (ActionAfterCompletion
// DELETE); one already gone is fine.
func (s *Scheduler) delete(ctx context.Context, sc schedule.Schedule) {
	_, err := s.Client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(sc.Name), GroupName: aws.String(sc.Group)})
	if err != nil && !schedule.IsNotFound(err) {
		s.log().Warn("scheduler: delete after completion", "schedule", sc.Group+"/"+sc.Name, "error", err)
	}
}

// deadLetter sends the input of sc's firing at at, which its target
// refused with code, to the schedule's dead-letter queue with the
// attributes EventBridge Scheduler sets, as for an error it does not retry
// (RETRY_ATTEMPTS 0, no EXHAUSTED_RETRY_CONDITION). It reports whether the
// firing is done: a schedule without a dead-letter queue drops the input,
// as the service does; a dead-letter queue the emulator cannot send to
// leaves the firing for the next pass.
func (s *Scheduler) deadLetter(ctx context.Context, log *slog.Logger, sc schedule.Schedule, at time.Time, exec, body, code, text string) bool {
	log = log.With("target", sc.TargetARN, "errorCode", code)
	if sc.DeadLetterARN == "" {
		log.Warn("scheduler: the target refused the input and the schedule has no dead-letter queue; dropped, as the service drops it")
		return true
	}
	url := s.DLQURLs[sc.DeadLetterARN]
	if s.DeadLetters == nil || url == "" {
		log.Warn("scheduler: the target refused the input and its dead-letter queue is not this stack's; tried again at the next pass", "deadLetterQueue", sc.DeadLetterARN)
		return false
	}
	str := func(v string) sqstypes.MessageAttributeValue {
		return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	attrs := map[string]sqstypes.MessageAttributeValue{
		schedule.AttrErrorCode: str(code), schedule.AttrErrorMessage: str(text), schedule.AttrExecutionID: str(exec),
		schedule.AttrPayloadTruncated: str("false"), schedule.AttrRetryAttempts: str("0"),
		schedule.AttrScheduledTime: str(at.UTC().Format(message.TickTimeLayout)), schedule.AttrScheduleARN: str(sc.ARN),
		schedule.AttrTargetARN: str(sc.TargetARN),
	}
	if _, err := s.DeadLetters.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		log.Warn("scheduler: the target refused the input and the dead-letter send failed; tried again at the next pass", "error", err)
		return false
	}
	log.Warn("scheduler: the target refused the input; sent to the schedule's dead-letter queue")
	return true
}
