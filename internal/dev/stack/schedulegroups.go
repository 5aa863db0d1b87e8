package stack

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// createScheduleGroup creates an EventBridge Scheduler schedule group, or
// reuses the one of that name: it is read first, since creating a group
// that exists would (on moto) replace it and lose its schedules.
func (s *Stack) createScheduleGroup(id string, props map[string]any) (Physical, error) {
	if s.clients.Scheduler == nil {
		return Physical{}, fmt.Errorf("schedule group %s: no scheduler client", id)
	}
	name := str(props["Name"])
	if name == "" {
		name = s.defaultName(id)
	}
	got, err := s.clients.Scheduler.GetScheduleGroup(s.ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(name)})
	var missing *schedtypes.ResourceNotFoundException
	switch {
	case err == nil:
		return Physical{Name: name, ARN: aws.ToString(got.Arn)}, nil
	case !errors.As(err, &missing):
		return Physical{}, fmt.Errorf("read schedule group %s: %w", name, err)
	}
	out, err := s.clients.Scheduler.CreateScheduleGroup(s.ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(name)})
	if err != nil {
		return Physical{}, fmt.Errorf("create schedule group %s: %w", name, err)
	}
	return Physical{Name: name, ARN: aws.ToString(out.ScheduleGroupArn)}, nil
}

// role is an IAM role as the local stack knows it: its name (RoleName,
// else one made from the stack and id) and ARN, so that what refers to it
// (a schedule's target role) resolves. Nothing is created: the local stack
// enforces no IAM.
func (s *Stack) role(id string, roleName any) (Physical, error) {
	name := s.defaultName(id)
	if roleName != nil {
		n, err := s.ResolveString(roleName)
		if err != nil {
			return Physical{}, err
		}
		name = n
	}
	return Physical{Type: TypeRole, Name: name, ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", s.opts.AccountID, name)}, nil
}
