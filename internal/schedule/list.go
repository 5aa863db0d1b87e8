package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/runstwice/runstwice/message"
)

// JobsGroup is the schedule group of a stage's one-time schedules (a job
// run at a time).
func JobsGroup(stage string) string { return "runstwice-" + stage + "-jobs" }

// RecurringGroup is the schedule group of a stage's recurring schedules
// (template.yaml).
func RecurringGroup(stage string) string { return "runstwice-" + stage + "-recurring" }

// The placeholders of a recurring schedule's input that the scheduler fills
// in when it fires (a tick's scheduledTime and correlationId).
const (
	PlaceholderScheduledTime = "<aws.scheduler.scheduled-time>"
	PlaceholderExecutionID   = "<aws.scheduler.execution-id>"
	PlaceholderScheduleARN   = "<aws.scheduler.schedule-arn>"
	PlaceholderAttempt       = "<aws.scheduler.attempt-number>"
)

// Schedule is one EventBridge Scheduler schedule as runstwice reads it.
type Schedule struct {
	Group, Name string
	ARN         string
	Expression  string
	Timezone    string
	State       string // ENABLED or DISABLED
	// TargetARN is the queue it sends to; Input what it sends (a tick, or
	// the envelope of a job run at a time).
	TargetARN string
	Input     string
	// DeadLetterARN is the queue the scheduler sends an input it could not
	// deliver to ("" for none).
	DeadLetterARN string
	// DeleteAfter is ActionAfterCompletion DELETE (a one-time schedule).
	DeleteAfter bool
	// Anchor is when a rate counts from: its start date, else its creation.
	Anchor time.Time
	// JobType is the type of the job it makes: the tick's type, or the
	// envelope's ("" when its input is neither).
	JobType string
	// Tick is true when its input is a tick.
	Tick bool
	// Expr is the parsed expression (nil when it does not parse: Err says
	// why).
	Expr *Expr
	Err  error
}

// Next is when the schedule fires next after now (false: never again, or
// disabled, or its expression does not parse).
func (s Schedule) Next(now time.Time) (time.Time, bool) {
	if s.Expr == nil || s.State == "DISABLED" {
		return time.Time{}, false
	}
	return s.Expr.Next(now, s.Anchor)
}

// Fill returns the schedule's input as the scheduler sends it for a firing
// at scheduled with execution id exec.
func (s Schedule) Fill(scheduled time.Time, exec string) string {
	return strings.NewReplacer(
		PlaceholderScheduledTime, scheduled.UTC().Format(message.TickTimeLayout),
		PlaceholderExecutionID, exec,
		PlaceholderScheduleARN, s.ARN,
		PlaceholderAttempt, "1",
	).Replace(s.Input)
}

// ListAPI is the part of the EventBridge Scheduler client List uses.
type ListAPI interface {
	ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, optFns ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
}

// List reads every schedule of the groups (every group when none is given),
// sorted by group and name. A schedule deleted between the list and its
// read is left out.
func List(ctx context.Context, client ListAPI, groups ...string) ([]Schedule, error) {
	var out []Schedule
	in := &scheduler.ListSchedulesInput{}
	for {
		page, err := client.ListSchedules(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("schedule: list: %w", err)
		}
		for _, sum := range page.Schedules {
			group := aws.ToString(sum.GroupName)
			if len(groups) > 0 && !slices.Contains(groups, group) {
				continue
			}
			got, err := client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: sum.Name, GroupName: sum.GroupName})
			if err != nil {
				if IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("schedule: get %s/%s: %w", group, aws.ToString(sum.Name), err)
			}
			out = append(out, fromOutput(got))
		}
		if page.NextToken == nil {
			break
		}
		in.NextToken = page.NextToken
	}
	slices.SortFunc(out, func(a, b Schedule) int {
		return strings.Compare(a.Group+"/"+a.Name, b.Group+"/"+b.Name)
	})
	return out, nil
}

// IsNotFound reports an error of a schedule (or group) that does not exist.
func IsNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}

func fromOutput(o *scheduler.GetScheduleOutput) Schedule {
	s := Schedule{
		Group: aws.ToString(o.GroupName), Name: aws.ToString(o.Name), ARN: aws.ToString(o.Arn),
		Expression: aws.ToString(o.ScheduleExpression), Timezone: aws.ToString(o.ScheduleExpressionTimezone),
		State: string(o.State), DeleteAfter: o.ActionAfterCompletion == "DELETE",
	}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	if o.Target != nil {
		s.TargetARN, s.Input = aws.ToString(o.Target.Arn), aws.ToString(o.Target.Input)
		if o.Target.DeadLetterConfig != nil {
			s.DeadLetterARN = aws.ToString(o.Target.DeadLetterConfig.Arn)
		}
	}
	s.Anchor = aws.ToTime(o.CreationDate)
	if o.StartDate != nil {
		s.Anchor = *o.StartDate
	}
	s.Expr, s.Err = Parse(s.Expression, s.Timezone)
	s.JobType, s.Tick = jobType(s)
	return s
}

// jobType reads the job type from a schedule's input: a tick (placeholders
// filled in), or an envelope.
func jobType(s Schedule) (string, bool) {
	body := []byte(s.Fill(time.Unix(0, 0), "x"))
	if message.IsTick(body) {
		t, err := message.DecodeTick(body)
		return t.Type, err == nil
	}
	if env, err := message.Decode(body); err == nil {
		return env.Type, false
	}
	return "", false
}
