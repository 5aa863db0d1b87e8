package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
)

// A continuation's parent must be its own caller's job. One enqueued over
// HTTP (or in a batch) is admitted only when its parent exists and is. An
// outbox child may be relayed before its parent's item (written in the
// same transaction): when its parent does not exist yet it is admitted
// all the same, listed on its parent's list as unchecked, and it waits;
// it belongs to that parent only if the parent, once there, is its
// caller's (the same producer's item), which settleStrangers checks as
// soon as anything reads the list with the parent there. A job id is
// derived from its caller and Idempotency-Key, so a producer that knows
// another caller's key could otherwise fill that caller's future job with
// continuations (its own then 409) that all ran at its end.

// attrUnchecked is the string set, on a parent's continuations item, of
// the continuations admitted before the parent existed, whose caller is
// not checked against the parent's yet.
const attrUnchecked = "unchecked"

// attach returns the writes that make job a continuation of its parent, for
// the reservation's transaction, in this order: a check that the parent's
// record is live and job's caller's (for a job reserved before its parent,
// job.beforeParent: that the parent is absent, expired, or job's caller's);
// the parent's continuations item lists job (fewer than MaxContinuations,
// or job already: a retry), unchecked too when reserved before its parent,
// its version counted, has no TTL while anything waits, and is listed for
// the continuation sweep (AttrSweep: the index sweep holds it). No item
// but the parent's own is written, so continuations of different parents
// never meet in one item.
func (s *Store) attach(job Job, now time.Time) ([]types.TransactWriteItem, error) {
	live := expression.AttributeNotExists(expression.Name(AttrExpiresAt)).Or(expression.Name(AttrExpiresAt).GreaterThan(expression.Value(now.Unix())))
	sameCaller := expression.Name("caller").Equal(expression.Value(job.Caller))
	parentCond := expression.AttributeExists(expression.Name(AttrPK)).And(live).And(sameCaller)
	if job.beforeParent {
		parentCond = expression.AttributeNotExists(expression.Name(AttrPK)).
			Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix()))).Or(sameCaller)
	}
	check, err := expression.NewBuilder().WithCondition(parentCond).Build()
	if err != nil {
		return nil, fmt.Errorf("jobs: attach %s: %w", job.ID, err)
	}
	set := expression.Value(&types.AttributeValueMemberSS{Value: []string{job.ID}})
	name := expression.Name(attrContinuations)
	upd := listOn(expression.Add(name, set).Add(expression.Name(attrVersion), expression.Value(1)).Remove(expression.Name(AttrExpiresAt)),
		listContinuations, job.After)
	if job.beforeParent {
		upd = upd.Add(expression.Name(attrUnchecked), set)
	}
	list, err := ddb.Update(s.table, keyAV(ContinuationsOfPK(job.After)), upd,
		expression.Or(expression.AttributeNotExists(name), name.Size().LessThan(expression.Value(MaxContinuations)),
			expression.Contains(name, job.ID)), true)
	if err != nil {
		return nil, fmt.Errorf("jobs: attach %s: %w", job.ID, err)
	}
	return []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(s.table), Key: keyAV(JobPK(job.After)), ConditionExpression: check.Condition(),
			ExpressionAttributeNames: check.Names(), ExpressionAttributeValues: check.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Update: list},
	}, nil
}

// admission is what Reserve does when the reservation of continuation job
// failed (err) with its own record absent: d when job is decided (an
// outbox child of another caller's job is reserved Cancelled, with the
// reason), again when the reservation is to be tried again (job, an outbox
// child whose parent does not exist yet, is now reserved before it; or
// strangers made room on its parent's list, which *checked records), an
// error when its parent refused it (ErrParentNotFound,
// ErrTooManyContinuations); nothing of these when its parent did not
// refuse it.
func (s *Store) admission(ctx context.Context, job *Job, err error, checked *bool) (d *Decision, again bool, _ error) {
	if item, failed := ddb.ItemAt(err, 2); failed {
		parent, present, rerr := s.parentRecord(ctx, job.After, item)
		switch {
		case rerr != nil:
			return nil, false, rerr
		case !present && parentMayFollow(*job) && !job.beforeParent:
			job.beforeParent = true
			return nil, true, nil
		case present && parentMayFollow(*job) && parent.Caller != job.Caller:
			refused, rerr := s.ReserveRefused(ctx, *job, strangerReason(job.After))
			return &refused, false, rerr
		}
		return nil, false, fmt.Errorf("%w: %s", ErrParentNotFound, job.After)
	}
	item, failed := ddb.ItemAt(err, 3)
	if !failed {
		return nil, false, nil
	}
	var list continuationsItem
	if item == nil { // the service did not return it: read it
		if _, gerr := s.getItem(ctx, ContinuationsOfPK(job.After), &list); gerr != nil {
			return nil, false, gerr
		}
	} else if _, derr := ddb.DecodeLive(item, s.now(), &list); derr != nil {
		return nil, false, fmt.Errorf("jobs: %w", derr)
	}
	if len(list.Unchecked) > 0 && !*checked {
		*checked = true
		parent, present, rerr := s.parentRecord(ctx, job.After, nil)
		if rerr != nil {
			return nil, false, rerr
		}
		if present {
			cancelled, serr := s.settleStrangers(ctx, parent, list.Unchecked)
			if serr != nil {
				return nil, false, serr
			}
			if len(cancelled) > 0 {
				return nil, true, nil
			}
		}
	}
	return nil, false, fmt.Errorf("%w: %s", ErrTooManyContinuations, job.After)
}

// parentRecord is the live record of job parentID: item when a failed
// condition returned it, else read.
func (s *Store) parentRecord(ctx context.Context, parentID string, item map[string]types.AttributeValue) (Job, bool, error) {
	var r record
	ok, err := ddb.DecodeLive(item, s.now(), &r)
	if item == nil {
		ok, err = s.getItem(ctx, JobPK(parentID), &r)
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("jobs: the parent %s: %w", parentID, err)
	}
	return r.job(), ok, nil
}

// strangerReason is why a continuation of job parentID, another caller's,
// is cancelled.
func strangerReason(parentID string) string {
	return fmt.Sprintf("the job it waits for, %s, is another caller's job", parentID)
}

// settleStrangers checks the continuations unchecked (admitted before
// their parent existed) against parent, which exists: each of another
// caller is cancelled with the reason (cancelled names those this call
// cancelled) and leaves the parent's list, so it neither counts against
// the parent's MaxContinuations nor runs at its end; each is then off the
// unchecked list. A stranger whose cancel failed stays unchecked, for the
// next reader of the list.
func (s *Store) settleStrangers(ctx context.Context, parent Job, unchecked []string) (cancelled []string, err error) {
	recs, err := s.records(ctx, unchecked)
	if err != nil {
		return nil, fmt.Errorf("jobs: check the continuations of %s: %w", parent.ID, err)
	}
	var strangers, checked []string
	var errs []error
	for _, id := range unchecked {
		c, ok := recs[id]
		if ok && c.Caller != parent.Caller {
			moved, err := s.cancelAwaiting(ctx, c, strangerReason(parent.ID))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !moved {
				cancelled = append(cancelled, id)
			}
			strangers = append(strangers, id)
		}
		checked = append(checked, id)
	}
	if len(checked) > 0 {
		upd := expression.Delete(expression.Name(attrUnchecked), expression.Value(&types.AttributeValueMemberSS{Value: checked}))
		if len(strangers) > 0 {
			upd = upd.Delete(expression.Name(attrContinuations), expression.Value(&types.AttributeValueMemberSS{Value: strangers}))
		}
		if err := s.updateItem(ctx, ContinuationsOfPK(parent.ID), upd, expression.AttributeExists(expression.Name(AttrPK))); err != nil &&
			!ddb.IsConditionFailed(err) {
			errs = append(errs, fmt.Errorf("jobs: check the continuations of %s: %w", parent.ID, err))
		}
	}
	return cancelled, errors.Join(errs...)
}

// without returns ids without those in drop.
func without(ids, drop []string) []string {
	return slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(drop, id) })
}
