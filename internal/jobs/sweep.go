package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SweepPK is the key of the schedule sweep's list: the ids of the jobs
// whose one-time schedule must not exist (the job was cancelled, or run
// now) but may still, because its delete failed, was cut short, or raced
// the enqueue that made it. The item has no expiresAt: it lives until the
// sweep has emptied it.
const SweepPK = "sweep#schedules"

// attrSweepIDs is the string set of job ids on the sweep's list.
const attrSweepIDs = "jobIds"

// sweepList adds (add) or removes jobID on the sweep's list: one UpdateItem,
// ADD or DELETE of a string set element, so concurrent writers never lose
// each other's ids, and repeating either is harmless.
func (s *Store) sweepList(ctx context.Context, jobID string, add bool) error {
	set := expression.Value(&types.AttributeValueMemberSS{Value: []string{jobID}})
	upd := expression.Delete(expression.Name(attrSweepIDs), set)
	if add {
		upd = expression.Add(expression.Name(attrSweepIDs), set)
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("jobs: sweep list: %w", err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyAV(SweepPK), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return fmt.Errorf("jobs: sweep list %s: %w", jobID, err)
	}
	return nil
}

// dropSchedule deletes the one-time schedule of j, which must not run
// (j was cancelled or sent now), under the sweep's list: j's id is listed
// first, the schedule deleted, and the id taken off the list once the
// schedule is gone and no enqueue can make it again (keepListed: a cancel
// that found the job Pending, whose enqueue may still be about to create
// it). A crash or a failure anywhere leaves the id listed, and the sweep
// deletes the schedule later, without a client's retry. A failed listing
// does not stop the delete; a delete that fails is an error, and so is a
// failed listing of a job that must stay listed.
func (s *Store) dropSchedule(ctx context.Context, j Job, keepListed bool) (existed bool, err error) {
	if s.Schedules == nil || !j.MayHaveSchedule() {
		return false, nil
	}
	listErr := s.sweepList(ctx, j.ID, true)
	existed, err = s.deleteSchedule(ctx, j)
	switch {
	case err != nil:
		return false, errors.Join(err, listErr)
	case keepListed && listErr != nil:
		// The schedule may still be made after this delete (the job's
		// enqueue is in flight): only the list would find it then. A retry
		// lists it.
		return false, fmt.Errorf("jobs: %s could not be listed for the schedule sweep: %w", j.ID, listErr)
	case !keepListed && listErr == nil:
		// Off the list: best effort, the sweep takes off what stays.
		_ = s.sweepList(ctx, j.ID, false)
	}
	return existed, nil
}

// DropSchedule deletes the one-time schedule of job j, which must not run:
// an enqueue that made it found j cancelled meanwhile (the cancel came
// between the reservation and the schedule, and found none to delete).
// The job is on the sweep's list while the delete is tried, so a failure
// leaves it to the sweep.
func (s *Store) DropSchedule(ctx context.Context, j Job) error {
	_, err := s.dropSchedule(ctx, j, false)
	return err
}

// SweepReport is what one sweep did.
type SweepReport struct {
	// Listed is how many job ids the list held.
	Listed int
	// Deleted names the jobs whose schedule the sweep deleted.
	Deleted []string
	// Kept names the jobs left on the list: their delete failed, or their
	// enqueue may still make the schedule (cancelled within the pending
	// timeout).
	Kept []string
}

// SweepSchedules deletes the one-time schedule of every job on the sweep's
// list (a schedule already gone is fine) and takes off the list each job
// whose schedule is gone for good: any job whose record was last written
// longer ago than the pending timeout (an enqueue that was making its
// schedule when it was cancelled is over by then). A job kept stays for
// the next sweep. A run takes on at most SweepWindow jobs, after those the
// last run took on (see window). Cost: one GetItem for an empty list (and
// an UpdateItem of its cursor when the list is longer than the window); per
// job taken on a DeleteSchedule, one GetItem of its record, one UpdateItem.
func (s *Store) SweepSchedules(ctx context.Context) (SweepReport, error) {
	ids, cursor, err := s.listed(ctx, SweepPK)
	if err != nil {
		return SweepReport{}, err
	}
	rep := SweepReport{Listed: len(ids)}
	if ids, err = s.window(ctx, SweepPK, ids, cursor); err != nil {
		return rep, err
	}
	var errs []error
	for _, id := range ids {
		var r record
		ok, err := s.getItem(ctx, JobPK(id), &r)
		if err != nil {
			rep.Kept, errs = append(rep.Kept, id), append(errs, err)
			continue
		}
		j := Job{ID: id}
		if ok {
			j = r.job()
		}
		if s.Schedules == nil {
			return rep, errors.New("jobs: the sweep needs the schedules")
		}
		existed, err := s.Schedules.Delete(ctx, id)
		if err != nil {
			rep.Kept, errs = append(rep.Kept, id), append(errs, fmt.Errorf("jobs: sweep %s: %w", id, err))
			continue
		}
		if existed {
			rep.Deleted = append(rep.Deleted, id)
		}
		if ok && s.now().Before(j.UpdatedAt.Add(s.pendingTimeout())) {
			// Written within the pending timeout (a cancel that found its
			// job Pending): its enqueue may still be making the schedule.
			rep.Kept = append(rep.Kept, id)
			continue
		}
		if err := s.sweepList(ctx, id, false); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// listed returns the job ids of the list item pk (a sweep's list), in
// order, and the list's cursor (see window); none when there is no list.
func (s *Store) listed(ctx context.Context, pk string) (ids []string, cursor string, err error) {
	var list struct {
		IDs    []string `dynamodbav:"jobIds,stringset"`
		Cursor string   `dynamodbav:"cursor"`
	}
	if _, err := s.getItem(ctx, pk, &list); err != nil {
		return nil, "", err
	}
	return slices.Sorted(slices.Values(list.IDs)), list.Cursor, nil
}

// DefaultSweepWindow is how many listed ids one run of a sweep takes on
// (Store.SweepWindow): a few seconds of work, well inside a run of the
// function.
const DefaultSweepWindow = 200

// attrCursor is where a sweep's list keeps the last id a run took on.
const attrCursor = "cursor"

// window returns what one run of the sweep of list pk takes on: at most
// SweepWindow of ids, those after the list's cursor (wrapping round to the
// first). When that is not all of them, the cursor moves to the last one
// taken before the run works on any (one UpdateItem), so the next run
// starts after them even if this one dies midway: every listed id is
// reached within a bounded number of runs, however long the list.
func (s *Store) window(ctx context.Context, pk string, ids []string, cursor string) ([]string, error) {
	n := cmp.Or(s.SweepWindow, DefaultSweepWindow)
	if len(ids) <= n {
		return ids, nil
	}
	start, _ := slices.BinarySearch(ids, cursor)
	if start < len(ids) && ids[start] == cursor {
		start++
	}
	win := make([]string, 0, n)
	for i := range n {
		win = append(win, ids[(start+i)%len(ids)])
	}
	err := s.updateItem(ctx, pk, expression.Set(expression.Name(attrCursor), expression.Value(win[n-1])),
		expression.AttributeExists(expression.Name(AttrPK)))
	if err != nil {
		return nil, fmt.Errorf("jobs: sweep %s cursor: %w", pk, err)
	}
	return win, nil
}
