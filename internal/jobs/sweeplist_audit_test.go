//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// throttledSweepList is the jobs table's client with every write of the
// sweep's list (the one item sweep#schedules, which every cancel and
// run-now of a scheduled job writes twice) refused, as DynamoDB throttles
// a hot key.
type throttledSweepList struct{ jobs.DynamoAPI }

func (c throttledSweepList) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key[jobs.AttrPK].(*types.AttributeValueMemberS); ok && pk.Value == jobs.SweepPK {
		return nil, errors.New("ProvisionedThroughputExceededException: throttled")
	}
	return c.DynamoAPI.UpdateItem(ctx, in, opts...)
}

// TestAuditCancelOfAPendingJobIsListedOrFails: a DELETE of a job still
// Pending (its enqueue is between the reservation and CreateSchedule). The
// cancel relies on the sweep's list to delete the schedule that enqueue is
// about to make (keepListed). dropSchedule ignores a failed listing when
// the delete succeeds, and the delete always succeeds here (there is no
// schedule yet), so the cancel answers 202 Cancelled with the job on no
// list. If the enqueue then makes the schedule and dies before its
// completion (its Lambda times out in a slow CreateSchedule), nothing
// deletes it: neither the enqueue's own drop nor the sweep, nor a client
// retry (the client got its 202). The schedule outlives its job unnoticed
// (its firing, months later, is dropped by the tombstone), contrary to
// "no schedule outlives its job unnoticed". The list is one item that every
// cancel and run-now writes, so throttling it is not far-fetched.
//
// A fix must guarantee: when the listing is what stands between a cancel
// and an orphan schedule (keepListed: the job was Pending), a failed
// listing fails the cancel (its retry lists it again), or the schedule is
// otherwise found later (the sweep also scans the job group's schedules
// against their jobs).
func TestAuditCancelOfAPendingJobIsListedOrFails(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	s := schedules{}
	store := jobs.NewStore(throttledSweepList{f.Client}, f.JobsTable, f.Markers)
	store.Now, store.Schedules = f.Clock.Now, s
	pending := jobstest.Reserve(t, store, scheduled(t, f, "racing", 40*day))
	_, cancelErr := store.Cancel(ctx, pending.ID, "c")
	// The enqueue makes the schedule, then dies before it completes.
	s[pending.ID] = true
	f.Clock.Advance(time.Hour)
	f.Store.Schedules = s
	if _, err := f.Store.SweepSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	if cancelErr == nil && s[pending.ID] {
		t.Fatalf("the cancel of a Pending job answered success without listing it for the sweep, and the schedule its enqueue made is left behind after the sweep")
	}
}
