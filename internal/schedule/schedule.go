// Package schedule is the adapter to EventBridge Scheduler for jobs due
// later than SQS can hold a message (15 minutes): one one-time schedule per
// job, in the stack's jobs group, named by the job id, that sends the job's
// message (its envelope, exactly the SQS body it would have had) to the
// job's work queue at its run time and then deletes itself. Its
// dead-letter queue is the stack's, and it sends as the scheduler role,
// which may only send to the work queues and the dead-letter queue.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/schedule/deletion"
	"github.com/runstwice/runstwice/message"
)

// SchedulerAPI is the part of the EventBridge Scheduler client the adapter
// uses. Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces.
type SchedulerAPI interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// GroupName is the name template.yaml gives a stage's group of one-time job
// schedules.
func GroupName(stage string) string { return "runstwice-" + stage + "-jobs" }

// Config is where the schedules go and what they may do.
type Config struct {
	// Group is the schedule group (GroupName of the stage).
	Group string
	// RoleARN is the role the scheduler sends as.
	RoleARN string
	// QueueARNs are the work queues' ARNs, the schedules' targets.
	QueueARNs map[message.Queue]string
	// DLQARN is the dead-letter queue of every schedule: a message the
	// scheduler could not deliver lands there, as a failed job does.
	DLQARN string
}

// Env is what ConfigFrom reads a configuration from (*envvar.Env is one).
type Env interface {
	Required(name string) string
	QueueARNs() map[message.Queue]string
}

// ConfigFrom reads the configuration of every function that enqueues as the
// API does (the enqueue function, the outbox relay) from its environment,
// each variable required: SCHEDULE_GROUP, SCHEDULER_ROLE_ARN, the work
// queues' ARNs and DLQ_ARN.
func ConfigFrom(env Env) Config {
	return Config{
		Group: env.Required("SCHEDULE_GROUP"), RoleARN: env.Required("SCHEDULER_ROLE_ARN"),
		QueueARNs: env.QueueARNs(), DLQARN: env.Required("DLQ_ARN"),
	}
}

// Scheduler creates and deletes one-time job schedules. Its zero value is
// not usable; call New.
type Scheduler struct {
	client SchedulerAPI
	cfg    Config
}

// New returns the scheduler on client with cfg.
func New(client SchedulerAPI, cfg Config) *Scheduler {
	return &Scheduler{client: client, cfg: cfg}
}

// Group returns the schedule group the scheduler works in.
func (s *Scheduler) Group() string { return s.cfg.Group }

// Job is the one-time schedule of one job.
type Job struct {
	// ID is the job id: the schedule's name.
	ID string
	// Queue is the job's work queue.
	Queue message.Queue
	// Body is the encoded envelope, the schedule's input.
	Body string
	// RunAt is when the scheduler sends it (to the second; the service's
	// precision is about a minute).
	RunAt time.Time
}

// AtExpression is the at() expression of t in UTC, rounded up to the next
// whole second (a job never runs before its time).
func AtExpression(t time.Time) string {
	t = t.UTC()
	if r := t.Truncate(time.Second); !r.Equal(t) {
		t = r.Add(time.Second)
	}
	return "at(" + t.Format("2006-01-02T15:04:05") + ")"
}

// MaxRetryAttempts is the retry policy's MaximumRetryAttempts of every
// schedule runstwice makes: the service's maximum (185), so that the
// retry window (MaximumEventAgeInSeconds = lifetime.SchedulerRetryWindow,
// a day) is what ends the retries. Every retry is a chance to deliver a
// job that would otherwise wait in the dead-letter queue for a person; the
// guards against a late second run already live for the whole window
// (internal/lifetime), so fewer tries would only dead-letter a job sooner
// during a long SQS outage, never make a delivery safer.
const MaxRetryAttempts = 185

// RetryPolicy is the retry policy of every schedule runstwice makes (the
// one-time job schedules here; template.yaml's recurring schedules have
// the same, which a template test keeps equal): a delivery its target
// failed is retried, with the service's back-off, up to MaxRetryAttempts
// times and for at most lifetime.SchedulerRetryWindow after the firing's
// time, then sent to the schedule's dead-letter queue. A delivery is
// therefore at most a day late, however long SQS refuses it.
func RetryPolicy() *types.RetryPolicy {
	return &types.RetryPolicy{
		MaximumEventAgeInSeconds: aws.Int32(int32(lifetime.SchedulerRetryWindow / time.Second)),
		MaximumRetryAttempts:     aws.Int32(MaxRetryAttempts),
	}
}

// Input is the CreateSchedule request for j: at(j.RunAt) in UTC, no
// flexible window, deleted after it fired, the job's queue as its target
// with the envelope as its input and RetryPolicy, the stack's DLQ as its
// dead-letter queue.
// The job id is also the client token, so the service treats a retried
// create as the same request.
func (s *Scheduler) Input(j Job) (*scheduler.CreateScheduleInput, error) {
	arn := s.cfg.QueueARNs[j.Queue]
	if arn == "" {
		return nil, fmt.Errorf("schedule: no ARN for queue %q", j.Queue)
	}
	in := &scheduler.CreateScheduleInput{
		Name:                       aws.String(j.ID),
		GroupName:                  aws.String(s.cfg.Group),
		ClientToken:                aws.String(j.ID),
		ScheduleExpression:         aws.String(AtExpression(j.RunAt)),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		Target: &types.Target{
			Arn:         aws.String(arn),
			RoleArn:     aws.String(s.cfg.RoleARN),
			Input:       aws.String(j.Body),
			RetryPolicy: RetryPolicy(),
		},
	}
	if s.cfg.DLQARN != "" {
		in.Target.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(s.cfg.DLQARN)}
	}
	return in, nil
}

// ErrQuotaExceeded is returned (wrapped, with the service's error) by
// Create when the account's quota of schedules is reached
// (ServiceQuotaExceededException): no retry can succeed until schedules
// fire and are deleted, or the quota is raised.
var ErrQuotaExceeded = errors.New("schedule: the account's EventBridge Scheduler schedule quota is reached")

// Create creates the one-time schedule of j. A schedule of that name that
// already exists is success: it is this job's, made by an earlier try of
// the same request (the name is the job id). An error matches
// ErrQuotaExceeded when the account holds as many schedules as its quota
// allows.
func (s *Scheduler) Create(ctx context.Context, j Job) error {
	in, err := s.Input(j)
	if err != nil {
		return err
	}
	_, err = s.client.CreateSchedule(ctx, in)
	var (
		conflict *types.ConflictException
		quota    *types.ServiceQuotaExceededException
	)
	switch {
	case err == nil, errors.As(err, &conflict):
		return nil
	case errors.As(err, &quota):
		return fmt.Errorf("schedule: create %s: %w: %w", j.ID, ErrQuotaExceeded, err)
	}
	return fmt.Errorf("schedule: create %s: %w", j.ID, err)
}

// Delete deletes the schedule of job jobID and reports whether there was
// one (deletion.Deleter.Delete). A schedule already gone (it fired, or was
// deleted before) is not an error: existed is false.
func (s *Scheduler) Delete(ctx context.Context, jobID string) (existed bool, err error) {
	return deletion.New(s.client, s.cfg.Group).Delete(ctx, jobID)
}
