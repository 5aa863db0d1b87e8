package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// SweepPK is the key of the schedule sweep's list item of release 4: the
// ids of the jobs whose one-time schedule must not exist (the job was
// cancelled, or run now) but may still, because its delete failed, was cut
// short, or raced the enqueue that made it. Nothing adds to it any more:
// each such job has an entry of its own in the index sweep
// (ScheduleSweepPK), and the sweep moves what a deployed stack's item
// still holds to the index (adoptLegacy).
const SweepPK = "sweep#schedules"

// attrSweepIDs is the string set of job ids on a release 4 list item.
const attrSweepIDs = "jobIds"

// ScheduleSweepPK is the key of job jobID's entry for the schedule sweep:
// an item of its own, listed in the index sweep while the job's schedule
// may still exist, with no expiresAt until it is taken off.
func ScheduleSweepPK(jobID string) string { return SweepPK + "#" + jobID }

// sweepList lists (add) jobID for the schedule sweep, or takes it off: one
// UpdateItem of the job's own entry, which sets or removes its listing
// (AttrSweep; taken off, the entry gets a TTL of a day), so concurrent
// writers of different jobs never meet in one item, and repeating either
// is harmless.
func (s *Store) sweepList(ctx context.Context, jobID string, add bool) error {
	upd := expression.Remove(expression.Name(AttrSweep)).
		Set(expression.Name(AttrExpiresAt), expression.Value(s.now().Add(24*time.Hour).Unix()))
	if add {
		upd = listOn(expression.Remove(expression.Name(AttrExpiresAt)), listSchedules, jobID)
	}
	if err := s.setItem(ctx, ScheduleSweepPK(jobID), upd); err != nil {
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
	// Listed is how many listed job ids the run took on (every one, unless
	// it ran out of time: the next run goes on from there).
	Listed int
	// Deleted names the jobs whose schedule the sweep deleted.
	Deleted []string
	// Kept names the jobs left on the list: their delete failed, or their
	// enqueue may still make the schedule (cancelled within the pending
	// timeout).
	Kept []string
	// Unfinished: the run stopped (out of time, or a failure) before it
	// took on every listed job; the next run goes on from there.
	Unfinished bool
	// Covered: another run of the sweep in this process, asked for after
	// this one, swept the whole list while this one waited for it.
	Covered bool
}

// ErrSweepUnfinished is what a sweep's tick fails with when its run
// stopped before it took on every listed id: the tick is retried, and the
// retry goes on from where the run stopped, rather than the rest waiting
// for the next tick (an hour, for the schedule sweep).
var ErrSweepUnfinished = errors.New("jobs: the sweep stopped before it took on every listed id; its next run goes on from there")

// SweepSchedules deletes the one-time schedule of every job listed for the
// schedule sweep (a schedule already gone is fine) and takes off the list
// each job whose schedule is gone for good: any job whose record was last
// written longer ago than the pending timeout (an enqueue that was making
// its schedule when it was cancelled is over by then). A job kept stays
// for the next sweep. The jobs come from the index sweep (walk), a page at
// a time; first it moves a batch of the release 4 list item to the index
// (adoptLegacy). Cost per listed job: one GetItem of its record, a
// DeleteSchedule, one UpdateItem.
func (s *Store) SweepSchedules(ctx context.Context) (SweepReport, error) {
	if s.Schedules == nil {
		return SweepReport{}, errors.New("jobs: the sweep needs the schedules")
	}
	var (
		rep SweepReport
		mu  sync.Mutex
	)
	legacyErr := s.adoptLegacy(ctx, SweepPK, func(ctx context.Context, id string) error { return s.sweepList(ctx, id, true) })
	w, err := s.walk(ctx, listSchedules, func(ctx context.Context, keys []string, out func() bool) (int, error) {
		var errs []error
		for i, k := range keys {
			if out() {
				return i, errors.Join(errs...)
			}
			deleted, kept, err := s.sweepSchedule(ctx, strings.TrimPrefix(k, ScheduleSweepPK("")))
			mu.Lock()
			id := strings.TrimPrefix(k, ScheduleSweepPK(""))
			if deleted {
				rep.Deleted = append(rep.Deleted, id)
			}
			if kept {
				rep.Kept = append(rep.Kept, id)
			}
			mu.Unlock()
			errs = append(errs, err)
		}
		return len(keys), errors.Join(errs...)
	})
	rep.Listed, rep.Unfinished, rep.Covered = w.Listed, w.Unfinished, w.Covered
	return rep, errors.Join(legacyErr, err)
}

// sweepSchedule deletes the schedule of listed job id and takes it off
// the list unless its enqueue may still make it (kept).
func (s *Store) sweepSchedule(ctx context.Context, id string) (deleted, kept bool, err error) {
	var r record
	ok, err := s.getItem(ctx, JobPK(id), &r)
	if err != nil {
		return false, true, err
	}
	j := Job{ID: id}
	if ok {
		j = r.job()
	}
	existed, err := s.Schedules.Delete(ctx, id)
	if err != nil {
		return false, true, fmt.Errorf("jobs: sweep %s: %w", id, err)
	}
	if ok && s.now().Before(j.UpdatedAt.Add(s.pendingTimeout())) {
		// Written within the pending timeout (a cancel that found its
		// job Pending): its enqueue may still be making the schedule.
		return existed, true, nil
	}
	return existed, false, s.sweepList(ctx, id, false)
}

// DefaultSweepWindow is how many listed ids a sweep takes on at a time
// (Store.SweepWindow): a page of one shard of its index.
const DefaultSweepWindow = 200

// attrCursor is where a shard's cursor item keeps the last id a run took
// on (see walk).
const attrCursor = "cursor"
