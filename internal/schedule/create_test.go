package schedule

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

// createAPI answers every CreateSchedule with err.
type createAPI struct{ err error }

func (c createAPI) CreateSchedule(context.Context, *scheduler.CreateScheduleInput, ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	return &scheduler.CreateScheduleOutput{}, c.err
}

func (c createAPI) DeleteSchedule(context.Context, *scheduler.DeleteScheduleInput, ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	return &scheduler.DeleteScheduleOutput{}, nil
}

// What Create's error says: an existing schedule is this job's (success);
// the account's schedule quota reached matches ErrQuotaExceeded, which no
// retry mends; any other failure does not.
func TestCreateTellsTheQuotaApart(t *testing.T) {
	quota := &types.ServiceQuotaExceededException{Message: aws.String("quota")}
	for _, tc := range []struct {
		name      string
		err       error
		fails     bool
		quotaFull bool
	}{
		{"created", nil, false, false},
		{"already exists", &types.ConflictException{Message: aws.String("exists")}, false, false},
		{"quota reached", quota, true, true},
		{"throttled", &types.ThrottlingException{Message: aws.String("slow down")}, true, false},
		{"other", errors.New("connection reset"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(createAPI{tc.err}, Config{Group: "g", RoleARN: "r", QueueARNs: map[message.Queue]string{contract.QueueDefault: "arn:d"}})
			err := s.Create(context.Background(), Job{ID: "j-1", Queue: contract.QueueDefault, Body: "{}", RunAt: time.Now().Add(time.Hour)})
			if (err != nil) != tc.fails || errors.Is(err, ErrQuotaExceeded) != tc.quotaFull {
				t.Fatalf("Create: %v; want failed %v, quota %v", err, tc.fails, tc.quotaFull)
			}
			var q *types.ServiceQuotaExceededException
			if tc.quotaFull && !errors.As(err, &q) {
				t.Errorf("the service's error is not kept in %v", err)
			}
		})
	}
}
