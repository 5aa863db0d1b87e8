package testenv

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// SchedulerRoleARN is the role the test schedulers name: moto checks none.
const SchedulerRoleARN = "arn:aws:iam::123456789012:role/runstwice-test-scheduler"

// NewJobScheduler creates a schedule group named after base, unique in this
// test binary (see Name), on client's endpoint, and returns the scheduler of
// one-time job schedules in it that targets the work queues wq and
// dead-letters to dlqARN.
func NewJobScheduler(t testing.TB, client *scheduler.Client, base string, wq WorkQueues, dlqARN string) *schedule.Scheduler {
	t.Helper()
	group := Name(t, base)
	if err := setup(func() error {
		_, err := client.CreateScheduleGroup(context.Background(), &scheduler.CreateScheduleGroupInput{Name: aws.String(group)})
		return err
	}); err != nil {
		t.Fatalf("create schedule group %s: %v", group, err)
	}
	arns := make(map[message.Queue]string, len(wq.Queues))
	for q, v := range wq.Queues {
		arns[q] = v.ARN
	}
	return schedule.New(client, schedule.Config{Group: group, RoleARN: SchedulerRoleARN, QueueARNs: arns, DLQARN: dlqARN})
}
