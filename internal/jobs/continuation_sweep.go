package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/lifetime"
)

// ContinuationSweepReport is what one continuation sweep did.
type ContinuationSweepReport struct {
	// Parents is how many parents the list held; the run took on at most
	// Store.SweepWindow of them, from where the last run stopped.
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
// whose letter was dropped or whose record is gone, a
// continuation enqueued as its parent ended whose enqueue stopped before it
// decided, and a release cut short. A run takes on at most SweepWindow
// parents, after those the last run took on (see window). Cost: one GetItem
// of the list (and an UpdateItem of its cursor when the list is longer than
// the window); per parent taken on a ReleaseContinuations (a GetItem and a marker read, then a BatchGetItem
// of its continuations when it has ended).
func (s *Store) SweepContinuations(ctx context.Context, send SendFunc) (ContinuationSweepReport, error) {
	ids, cursor, err := s.listed(ctx, ContinuationsPK)
	if err != nil {
		return ContinuationSweepReport{}, err
	}
	rep := ContinuationSweepReport{Parents: len(ids)}
	if ids, err = s.window(ctx, ContinuationsPK, ids, cursor); err != nil {
		return rep, err
	}
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
		if kept, err := s.unlistParent(ctx, id, r.Version); err != nil {
			errs = append(errs, err)
		} else if kept {
			rep.Kept = append(rep.Kept, id)
		}
	}
	return rep, errors.Join(errs...)
}

// unlistParent takes parent off the continuation sweep's list, in one
// transaction with a check that the parent's list is still at version (the
// one its release read): a continuation that joined the list since keeps
// the parent listed (kept), for the next sweep to decide it.
func (s *Store) unlistParent(ctx context.Context, parent string, version int64) (kept bool, err error) {
	if version == 0 {
		// It has no list at all (it expired): nothing can have joined it.
		return false, s.unlist(ctx, parent)
	}
	cond := expression.Name(attrVersion).Equal(expression.Value(version))
	// Nothing waits for the parent any more: its list lives on, for the
	// views that draw the chain and for a redrive of the parent's letter
	// (continuationsLife).
	check, err := expression.NewBuilder().WithCondition(cond).
		WithUpdate(expression.Set(expression.Name(AttrExpiresAt), expression.Value(continuationsLife(s.now())))).Build()
	if err != nil {
		return false, fmt.Errorf("jobs: continuation sweep: %w", err)
	}
	off, err := expression.NewBuilder().WithUpdate(expression.Delete(expression.Name(attrSweepIDs),
		expression.Value(&types.AttributeValueMemberSS{Value: []string{parent}}))).Build()
	if err != nil {
		return false, fmt.Errorf("jobs: continuation sweep: %w", err)
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(s.table), Key: keyAV(ContinuationsOfPK(parent)), UpdateExpression: check.Update(),
			ConditionExpression: check.Condition(), ExpressionAttributeNames: check.Names(), ExpressionAttributeValues: check.Values()}},
		{Update: &types.Update{TableName: aws.String(s.table), Key: keyAV(ContinuationsPK), UpdateExpression: off.Update(),
			ExpressionAttributeNames: off.Names(), ExpressionAttributeValues: off.Values()}},
	}})
	return conditionFailed(err, "continuation sweep "+parent)
}

// continuationsLife is the TTL of a parent's list once nothing waits for
// it (at now): as long as a settled marker (lifetime.Marker), longer than
// the parent's dead letter is kept once its record is gone (a Failed
// record lives TerminalRetention, its letter 30 days from when it was
// dead-lettered), so a redrive of that letter still finds the list and is
// refused (Lifecycle.Inspect).
func continuationsLife(now time.Time) int64 { return now.Add(lifetime.Marker).Unix() }

// unlist takes parent off the continuation sweep's list.
func (s *Store) unlist(ctx context.Context, parent string) error {
	err := s.updateItem(ctx, ContinuationsPK,
		expression.Delete(expression.Name(attrSweepIDs), expression.Value(&types.AttributeValueMemberSS{Value: []string{parent}})),
		expression.AttributeExists(expression.Name(AttrPK)))
	if err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: continuation sweep %s: %w", parent, err)
	}
	return nil
}
