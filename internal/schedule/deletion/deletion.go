// Package deletion deletes the one-time schedules of jobs: the one call a
// function that never creates a schedule needs (the worker's schedule
// sweep), apart from package schedule, so that such a function's role is
// granted scheduler:DeleteSchedule alone.
package deletion

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// DeleteAPI is the part of the EventBridge Scheduler client a Deleter uses.
// Like every store, it declares its own SDK methods: the template's IAM
// test derives each function's actions from them.
type DeleteAPI interface {
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Deleter deletes the one-time schedules of jobs in one schedule group
// (jobs.ScheduleDeleter).
type Deleter struct {
	client DeleteAPI
	group  string
}

// New returns the deleter of group's schedules.
func New(client DeleteAPI, group string) *Deleter { return &Deleter{client: client, group: group} }

// Delete deletes the schedule of job jobID, named by it, and reports
// whether there was one. A schedule already gone (it fired, or was deleted
// before) is not an error: existed is false.
func (d *Deleter) Delete(ctx context.Context, jobID string) (existed bool, err error) {
	_, err = d.client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(jobID), GroupName: aws.String(d.group)})
	var gone *types.ResourceNotFoundException
	switch {
	case errors.As(err, &gone):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("schedule: delete %s: %w", jobID, err)
	}
	return true, nil
}
