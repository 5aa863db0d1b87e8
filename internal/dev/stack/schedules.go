package stack

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// The schedule groups and schedules the local stack creates, from their
// template properties (EventBridge Scheduler; moto keeps them, the local
// stack's emulator fires them).

func (s *Stack) createSchedule(id string, props map[string]any) (Physical, error) {
	name := str(props["Name"])
	if name == "" {
		name = s.defaultName(id)
	}
	group := str(props["GroupName"])
	tm := asMap(props["Target"])
	target := &schedtypes.Target{Arn: aws.String(str(tm["Arn"])), RoleArn: aws.String(str(tm["RoleArn"]))}
	if in, ok := tm["Input"]; ok {
		target.Input = aws.String(scalarString(in))
	}
	if dl := asMap(tm["DeadLetterConfig"]); len(dl) > 0 {
		target.DeadLetterConfig = &schedtypes.DeadLetterConfig{Arn: aws.String(str(dl["Arn"]))}
	}
	if rp := asMap(tm["RetryPolicy"]); len(rp) > 0 {
		target.RetryPolicy = &schedtypes.RetryPolicy{}
		if v, ok := rp["MaximumEventAgeInSeconds"]; ok {
			target.RetryPolicy.MaximumEventAgeInSeconds = aws.Int32(int32(atoi(v)))
		}
		if v, ok := rp["MaximumRetryAttempts"]; ok {
			target.RetryPolicy.MaximumRetryAttempts = aws.Int32(int32(atoi(v)))
		}
	}
	window := &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowMode(str(asMap(props["FlexibleTimeWindow"])["Mode"]))}
	if m := asMap(props["FlexibleTimeWindow"])["MaximumWindowInMinutes"]; m != nil {
		window.MaximumWindowInMinutes = aws.Int32(int32(atoi(m)))
	}
	optional := func(k string) *string {
		if v := str(props[k]); v != "" {
			return aws.String(v)
		}
		return nil
	}
	expr, tz, desc := aws.String(str(props["ScheduleExpression"])), optional("ScheduleExpressionTimezone"), optional("Description")
	state := schedtypes.ScheduleState(str(props["State"]))
	_, err := s.clients.Scheduler.GetSchedule(s.ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: optional("GroupName")})
	var missing *schedtypes.ResourceNotFoundException
	switch {
	case err == nil:
		_, err = s.clients.Scheduler.UpdateSchedule(s.ctx, &scheduler.UpdateScheduleInput{
			Name: aws.String(name), GroupName: optional("GroupName"), ScheduleExpression: expr, ScheduleExpressionTimezone: tz,
			Description: desc, FlexibleTimeWindow: window, Target: target, State: state,
		})
	case errors.As(err, &missing):
		_, err = s.clients.Scheduler.CreateSchedule(s.ctx, &scheduler.CreateScheduleInput{
			Name: aws.String(name), GroupName: optional("GroupName"), ScheduleExpression: expr, ScheduleExpressionTimezone: tz,
			Description: desc, FlexibleTimeWindow: window, Target: target, State: state,
		})
	}
	if err != nil {
		return Physical{}, fmt.Errorf("schedule %s/%s: %w", group, name, err)
	}
	arn := fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule/%s/%s", s.opts.Region, s.opts.AccountID, group, name)
	return Physical{Name: name, ARN: arn}, nil
}
