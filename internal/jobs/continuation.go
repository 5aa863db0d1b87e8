package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/lifetime"
)

// A continuation is a job enqueued with "after": it waits,
// AwaitingContinuation, for its parent to end, and is then released (sent,
// exactly once) or cancelled, as its afterPolicy says. Its reservation
// lists it on its parent's record (attach); whatever sees the parent end
// then calls ReleaseContinuations: the enqueue itself when the parent had already ended,
// the chain function for every settled marker on the markers table's
// stream, and the continuation sweep for the ends no marker shows (a
// parent that expired, or whose dead letter was dropped) and for a release
// cut short by a crash.

// MaxContinuations is how many continuations may wait for one job.
const MaxContinuations = 100

// ContinuationsPK is the key of the continuation sweep's list: the ids of
// the jobs that have, or may have, continuations still waiting. A
// reservation lists the parent in its own transaction; the sweep takes it
// off once nothing waits for it.
const ContinuationsPK = "sweep#continuations"

// attrContinuations is the string set of a parent's continuations, on its
// continuations item.
const attrContinuations = "continuations"

// ContinuationsOfPK is the key of the item that lists the continuations of
// job parentID. It is an item of its own, not part of the parent's record,
// so the list lives as long as a continuation may wait (whatever the
// parent's record's own life) and a parent's own writes never touch it.
func ContinuationsOfPK(parentID string) string { return "continuations#" + parentID }

// ErrParentNotFound is returned (wrapped) by Reserve for a continuation
// whose parent does not exist (or expired) or is another caller's job.
var ErrParentNotFound = errors.New("jobs: the job it waits for is not found")

// ErrTooManyContinuations is returned (wrapped) by Reserve for a
// continuation whose parent already has MaxContinuations.
var ErrTooManyContinuations = fmt.Errorf("jobs: the job it waits for already has %d continuations", MaxContinuations)

// continuationsItem is a parent's continuations item as stored.
type continuationsItem struct {
	IDs       []string `dynamodbav:"continuations,stringset"`
	ExpiresAt int64    `dynamodbav:"expiresAt"`
}

// attach returns the writes that make job a continuation of its parent, for
// the reservation's transaction, in this order: a check that the parent's
// record is live and job's caller's; the parent's continuations item lists
// job (fewer than MaxContinuations, or job already: a retry) and lives as
// long as a continuation may wait; the continuation sweep's list names the
// parent.
func (s *Store) attach(job Job, now time.Time) ([]types.TransactWriteItem, error) {
	check, err := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(AttrPK)).
		And(expression.Name(AttrExpiresAt).GreaterThan(expression.Value(now.Unix()))).
		And(expression.Name("caller").Equal(expression.Value(job.Caller)))).Build()
	if err != nil {
		return nil, fmt.Errorf("jobs: attach %s: %w", job.ID, err)
	}
	set := expression.Value(&types.AttributeValueMemberSS{Value: []string{job.ID}})
	name := expression.Name(attrContinuations)
	list, err := ddb.Update(s.table, keyAV(ContinuationsOfPK(job.After)),
		expression.Add(name, set).Set(expression.Name(AttrExpiresAt), expression.Value(awaitingExpiry(now))),
		expression.Or(expression.AttributeNotExists(name), name.Size().LessThan(expression.Value(MaxContinuations)),
			expression.Contains(name, job.ID)), true)
	if err != nil {
		return nil, fmt.Errorf("jobs: attach %s: %w", job.ID, err)
	}
	sweep, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name(attrSweepIDs),
		expression.Value(&types.AttributeValueMemberSS{Value: []string{job.After}}))).Build()
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
		{Update: &types.Update{TableName: aws.String(s.table), Key: keyAV(ContinuationsPK), UpdateExpression: sweep.Update(),
			ExpressionAttributeNames: sweep.Names(), ExpressionAttributeValues: sweep.Values()}},
	}, nil
}

// attachRefused says why the reservation of continuation job was refused
// by its parent, given the reservation's error: the parent's check failed
// (ErrParentNotFound) or its list is full (ErrTooManyContinuations); nil
// when neither.
func attachRefused(job Job, err error) error {
	if _, failed := ddb.ItemAt(err, 2); failed {
		return fmt.Errorf("%w: %s", ErrParentNotFound, job.After)
	}
	if _, failed := ddb.ItemAt(err, 3); failed {
		return fmt.Errorf("%w: %s", ErrTooManyContinuations, job.After)
	}
	return nil
}

// Verdict is what a continuation's parent's end means for it.
type Verdict int

// The verdicts.
const (
	// Wait: the parent has not ended, or Failed with a letter that may
	// still be redriven (under OnSucceeded).
	Wait Verdict = iota
	// Run: the parent ended as the policy runs it.
	Run
	// Cancel: the parent ended in a way the policy refuses.
	Cancel
)

// Judge is the verdict for a continuation under policy of parent p (as
// View derives it) at now. A Failed parent may be redriven while its letter
// was not dropped and can still be in the dead-letter queue.
func Judge(policy contract.AfterPolicy, p Job, now time.Time) Verdict {
	switch {
	case !p.State.Terminal():
		return Wait
	case policy == contract.OnAnyEnd, p.State == StateSucceeded:
		return Run
	case p.State == StateFailed && !p.LetterDropped && p.FailedAt != nil && now.Before(p.FailedAt.Add(lifetime.DLQRetention)):
		return Wait
	}
	return Cancel
}

// ReleaseReport is what one ReleaseContinuations did.
type ReleaseReport struct {
	// State is the parent's state.
	State State
	// Sent, Cancelled and Waiting name the continuations this release sent,
	// cancelled, and left waiting (their parent has not ended, or a
	// Failed one may be redriven, or another release is sending them).
	Sent, Cancelled, Waiting []string
}

// ReleaseContinuations decides the continuations of job parentID: once the parent has
// ended, each one that still awaits it is sent (with send, then promoted as
// a new job is) or cancelled with a reason naming the parent, as its
// afterPolicy judges the end (Judge). The one write that moves a
// continuation out of AwaitingContinuation is conditional on that state,
// so however often and however concurrently a parent's end is released, a
// continuation is sent by one release only. A continuation whose release
// stopped after that write and before its message was promoted (a crash,
// a failed send) is sent again by a later release once the pending timeout
// has passed, under the same id: its marker makes the two one run. A
// parent without continuations costs one read (GetItem of its
// continuations item); one with, two more (its record and its marker), and
// a BatchGetItem of the continuations once it has ended.
func (s *Store) ReleaseContinuations(ctx context.Context, parentID string, send SendFunc) (ReleaseReport, error) {
	var list continuationsItem
	ok, err := s.getItem(ctx, ContinuationsOfPK(parentID), &list)
	switch {
	case err != nil:
		return ReleaseReport{}, err
	case !ok || len(list.IDs) == 0:
		return ReleaseReport{}, nil
	}
	ids := slices.Sorted(slices.Values(list.IDs))
	parent, err := s.parentEnd(ctx, parentID)
	if err != nil {
		return ReleaseReport{}, err
	}
	rep := ReleaseReport{State: parent.State}
	if !parent.State.Terminal() {
		rep.Waiting = ids
		return rep, nil
	}
	children, err := s.records(ctx, ids)
	if err != nil {
		return rep, fmt.Errorf("jobs: release %s: %w", parentID, err)
	}
	var errs []error
	for _, id := range ids {
		c, ok := children[id]
		if !ok || c.After != parentID {
			continue
		}
		switch done, err := s.releaseOne(ctx, parent, c, send); {
		case err != nil:
			errs = append(errs, err)
			rep.Waiting = append(rep.Waiting, id)
		case done == Run:
			rep.Sent = append(rep.Sent, id)
		case done == Cancel:
			rep.Cancelled = append(rep.Cancelled, id)
		case c.stored == StateAwaitingContinuation || c.stored == StatePending:
			rep.Waiting = append(rep.Waiting, id)
		}
	}
	return rep, errors.Join(errs...)
}

// parentEnd reads the parent of a continuation with its derived state. A
// parent whose record is gone (it ended long ago, or expired) reads
// Expired: it did not succeed as far as anything can still tell.
func (s *Store) parentEnd(ctx context.Context, parentID string) (Job, error) {
	rec, m, has, err := s.read(ctx, parentID)
	switch {
	case errors.Is(err, ErrNotFound):
		return Job{ID: parentID, State: StateExpired, stored: StateExpired}, nil
	case err != nil:
		return Job{}, fmt.Errorf("jobs: release %s: %w", parentID, err)
	}
	return s.view(rec, m, has), nil
}

// releaseOne decides continuation c of ended parent: it returns Run when
// this call sent it, Cancel when this call cancelled it, and Wait when it
// did neither (it waits, or was decided before, or another release is
// sending it).
func (s *Store) releaseOne(ctx context.Context, parent, c Job, send SendFunc) (Verdict, error) {
	now := s.now()
	switch {
	case c.stored == StatePending && !c.ReleasedAt.IsZero():
		// Released, its message not yet promoted: another release is
		// sending it, or one stopped part-way and left it to this one.
		if now.Sub(c.UpdatedAt) <= s.pendingTimeout() {
			return Wait, nil
		}
		return s.sendReleased(ctx, c, send)
	case c.stored != StateAwaitingContinuation:
		return Wait, nil
	}
	switch Judge(c.AfterPolicy, parent, now) {
	case Run:
		c.stored, c.State, c.ReleasedAt, c.RunAt, c.UpdatedAt = StatePending, StatePending, now, now, now
		upd := expression.Set(expression.Name(AttrState), expression.Value(StatePending)).
			Set(expression.Name("releasedAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name("runAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name(AttrExpiresAt), expression.Value(activeExpiry(now)))
		if moved, err := s.moveAwaiting(ctx, c.ID, upd); err != nil || moved {
			return Wait, err
		}
		return s.sendReleased(ctx, c, send)
	case Cancel:
		reason := fmt.Sprintf("the job it waits for, %s, ended %s", parent.ID, parent.State)
		if parent.State == StateFailed {
			reason += " and can no longer be redriven"
		}
		upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StateCancelled)), now, OutcomeCancelled, reason).
			Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name(AttrExpiresAt), expression.Value(terminalExpiry(now, time.Time{})))
		if moved, err := s.moveAwaiting(ctx, c.ID, upd); err != nil || moved {
			return Wait, err
		}
		return Cancel, nil
	}
	return Wait, nil
}

// moveAwaiting writes upd to continuation id on condition that it still
// awaits its parent; moved reports that it no longer did (another release
// or a cancel got there first), which is not an error.
func (s *Store) moveAwaiting(ctx context.Context, id string, upd expression.UpdateBuilder) (moved bool, err error) {
	u, err := ddb.Update(s.table, keyAV(JobPK(id)), upd, existsIn(StateAwaitingContinuation), false)
	if err != nil {
		return false, fmt.Errorf("jobs: release %s: %w", id, err)
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	switch {
	case ddb.IsConditionFailed(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("jobs: release %s: %w", id, err)
	}
	return false, nil
}

// sendReleased sends a released continuation's message and promotes it.
// A send that fails leaves it Pending for a later release (after the
// pending timeout) to send again.
func (s *Store) sendReleased(ctx context.Context, c Job, send SendFunc) (Verdict, error) {
	c.RunAt = s.now()
	if err := send(ctx, c); err != nil {
		return Wait, fmt.Errorf("jobs: release %s: send: %w", c.ID, err)
	}
	if err := s.Promote(ctx, c); err != nil {
		// Sent: a later release sends it again under the same id, which its
		// marker makes one run.
		return Run, err
	}
	return Run, nil
}

// records reads the records of ids (consistent, 100 keys a call; an id
// given twice is read once) by id; missing or expired ones are left out.
func (s *Store) records(ctx context.Context, ids []string) (map[string]Job, error) {
	out := make(map[string]Job, len(ids))
	now := s.now()
	distinct := slices.Compact(slices.Sorted(slices.Values(ids))) // BatchGetItem refuses a key twice
	for chunk := range slices.Chunk(distinct, 100) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = keyAV(JobPK(id))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == 5 {
				return nil, errors.New("jobs: records: keys still unprocessed")
			}
			res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("jobs: records: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				var r record
				if ok, err := ddb.DecodeLive(item, now, &r); err != nil {
					return nil, fmt.Errorf("jobs: %w", err)
				} else if ok {
					out[r.JobID] = r.job()
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// detach takes continuation c, cancelled while it waited, off its parent's
// list, so it no longer counts against MaxContinuations. Best effort: a
// cancelled continuation left listed is only counted.
func (s *Store) detach(ctx context.Context, c Job) {
	if c.After == "" {
		return
	}
	u, err := ddb.Update(s.table, keyAV(ContinuationsOfPK(c.After)),
		expression.Delete(expression.Name(attrContinuations), expression.Value(&types.AttributeValueMemberSS{Value: []string{c.ID}})),
		expression.AttributeExists(expression.Name(AttrPK)), false)
	if err == nil {
		_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	}
	_ = err // best effort, as documented
}

// Parents returns those of ids that have continuations (a continuations
// item), in the order of ids: what the chain function releases of the jobs
// a batch of the markers stream shows ended. One consistent BatchGetItem
// per 100 ids.
func (s *Store) Parents(ctx context.Context, ids []string) ([]string, error) {
	has := map[string]bool{}
	distinct := slices.Compact(slices.Sorted(slices.Values(ids))) // BatchGetItem refuses a key twice
	for chunk := range slices.Chunk(distinct, 100) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = keyAV(ContinuationsOfPK(id))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String(AttrPK)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == 5 {
				return nil, errors.New("jobs: parents: keys still unprocessed")
			}
			res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("jobs: parents: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				if pk, ok := item[AttrPK].(*types.AttributeValueMemberS); ok {
					has[strings.TrimPrefix(pk.Value, "continuations#")] = true
				}
			}
			req = res.UnprocessedKeys
		}
	}
	var out []string
	for _, id := range ids {
		if has[id] && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Continuations returns the ids of the jobs that wait (or waited) for job
// parentID, sorted: the chain an operator's view draws. One GetItem.
func (s *Store) Continuations(ctx context.Context, parentID string) ([]string, error) {
	var list continuationsItem
	if _, err := s.getItem(ctx, ContinuationsOfPK(parentID), &list); err != nil {
		return nil, err
	}
	return slices.Sorted(slices.Values(list.IDs)), nil
}

// Views returns the jobs ids with their derived states, in the order of
// ids; a job that does not exist (or expired) is left out. One BatchGetItem
// of the records and one of their markers per 100 jobs.
func (s *Store) Views(ctx context.Context, ids []string) ([]Job, error) {
	byID, err := s.records(ctx, ids)
	if err != nil {
		return nil, err
	}
	recs := make([]Job, 0, len(byID))
	for _, id := range ids {
		if j, ok := byID[id]; ok {
			recs = append(recs, j)
		}
	}
	peeker, _ := s.markers.(BatchPeeker)
	return ViewAll(ctx, peeker, recs, s.now())
}

// ContinuationSweepReport is what one continuation sweep did.
type ContinuationSweepReport struct {
	// Parents is how many parents the list held.
	Parents int
	// Sent and Cancelled name the continuations the sweep decided.
	Sent, Cancelled []string
	// Kept names the parents left on the list: something still waits for
	// them, or their release failed.
	Kept []string
}

// SweepContinuations releases the continuations of every parent on the
// continuation sweep's list (ReleaseContinuations) and takes off the list each parent
// nothing waits for any more. It decides what no
// marker's stream record shows: a parent that Expired, a Failed parent
// whose letter was dropped or has aged out of the dead-letter queue, a
// continuation enqueued as its parent ended whose enqueue stopped before it
// decided, and a release cut short. Cost: one GetItem of the list; per
// listed parent a ReleaseContinuations (a GetItem and a marker read, then a BatchGetItem
// of its continuations when it has ended).
func (s *Store) SweepContinuations(ctx context.Context, send SendFunc) (ContinuationSweepReport, error) {
	var list struct {
		IDs []string `dynamodbav:"jobIds,stringset"`
	}
	if _, err := s.getItem(ctx, ContinuationsPK, &list); err != nil {
		return ContinuationSweepReport{}, err
	}
	ids := slices.Sorted(slices.Values(list.IDs))
	rep := ContinuationSweepReport{Parents: len(ids)}
	var errs []error
	for _, id := range ids {
		r, err := s.ReleaseContinuations(ctx, id, send)
		rep.Sent = append(rep.Sent, r.Sent...)
		rep.Cancelled = append(rep.Cancelled, r.Cancelled...)
		switch {
		case err != nil:
			errs = append(errs, err)
			rep.Kept = append(rep.Kept, id)
			continue
		case len(r.Waiting) > 0:
			rep.Kept = append(rep.Kept, id)
			continue
		}
		if err := s.unlistParent(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// unlistParent takes parent off the continuation sweep's list.
func (s *Store) unlistParent(ctx context.Context, parent string) error {
	u, err := ddb.Update(s.table, keyAV(ContinuationsPK),
		expression.Delete(expression.Name(attrSweepIDs), expression.Value(&types.AttributeValueMemberSS{Value: []string{parent}})),
		expression.AttributeExists(expression.Name(AttrPK)), false)
	if err != nil {
		return fmt.Errorf("jobs: continuation sweep: %w", err)
	}
	if _, err := s.client.UpdateItem(ctx, ddb.UpdateInput(u)); err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: continuation sweep %s: %w", parent, err)
	}
	return nil
}
