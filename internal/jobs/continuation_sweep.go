package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/lifetime"
)

// ContinuationSweepReport is what one continuation sweep did.
type ContinuationSweepReport struct {
	// Parents is how many listed parents the run took on (every one, unless
	// it ran out of time: the next run goes on from there).
	Parents int
	// Sent and Cancelled name the continuations the sweep decided.
	Sent, Cancelled []string
	// Kept names the parents left listed: something still waits for them,
	// or their release failed.
	Kept []string
	// Unfinished: the run stopped (out of time, or a failure) before it
	// took on every listed parent; the next run goes on from there.
	Unfinished bool
	// Covered: another run of the sweep in this process, asked for after
	// this one, swept the whole list while this one waited for it.
	Covered bool
}

// SweepContinuations releases the continuations of every parent listed for
// the continuation sweep (ReleaseContinuations) and takes off the list
// each parent nothing waits for any more. It decides what no marker's
// stream record shows: a parent that Expired, a Failed parent whose letter
// was dropped or whose record is gone, a continuation enqueued as its parent
// ended whose enqueue stopped before it decided, and a release cut short.
// The parents come from the index sweep (walk), a page at a time; first it
// moves a batch of the release 4 list item to the index (adoptLegacy).
// Cost per page of parents: one BatchGetItem of their continuations items
// and one of their records, one read of their markers; a release (see
// ReleaseContinuations) only for each parent that has ended or has
// continuations of unchecked callers, and one UpdateItem to take off each
// parent nothing waits for.
func (s *Store) SweepContinuations(ctx context.Context, send SendFunc) (ContinuationSweepReport, error) {
	var (
		rep ContinuationSweepReport
		mu  sync.Mutex
	)
	legacyErr := s.adoptLegacy(ctx, ContinuationsPK, s.adoptParent)
	w, err := s.walk(ctx, listContinuations, func(ctx context.Context, keys []string, out func() bool) (int, error) {
		page, done, err := s.sweepParents(ctx, keys, send, out)
		mu.Lock()
		defer mu.Unlock()
		rep.Sent = append(rep.Sent, page.Sent...)
		rep.Cancelled = append(rep.Cancelled, page.Cancelled...)
		rep.Kept = append(rep.Kept, page.Kept...)
		return done, err
	})
	rep.Parents, rep.Unfinished, rep.Covered = w.Listed, w.Unfinished, w.Covered
	return rep, errors.Join(legacyErr, err)
}

// parentIDs are the parents of continuations items keys.
func parentIDs(keys []string) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = strings.TrimPrefix(k, ContinuationsOfPK(""))
	}
	return ids
}

// sweepParents is the continuation sweep of one page of listed parents
// (keys: their continuations items). A parent that has not ended and whose
// continuations' callers are all checked has nothing to decide
// (ReleaseContinuations would leave them all waiting): it is kept without
// a release. The reads that tell are made for the whole page at once.
// done is how many of keys it took on: it stops before a release when out
// reports the run out of time.
func (s *Store) sweepParents(ctx context.Context, keys []string, send SendFunc, out func() bool) (rep ContinuationSweepReport, done int, _ error) {
	parents := parentIDs(keys)
	lists, err := s.continuationsItems(ctx, parents)
	if err != nil {
		return ContinuationSweepReport{Kept: parents}, len(keys), err
	}
	ended, err := s.ended(ctx, parents)
	if err != nil {
		return ContinuationSweepReport{Kept: parents}, len(keys), err
	}
	var (
		mu   sync.Mutex // guards rep and errs
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, sweepReleasesAtOnce)
	)
	keep := func(id string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		rep.Kept = append(rep.Kept, id)
	}
	done = len(keys)
	for i, id := range parents {
		if out() {
			done = i // the rest are the next run's
			break
		}
		list, listed := lists[id]
		if listed && len(list.IDs) > 0 && len(list.Unchecked) == 0 && !ended[id] {
			keep(id, nil)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := s.ReleaseContinuations(ctx, id, send)
			mu.Lock()
			rep.Sent = append(rep.Sent, r.Sent...)
			rep.Cancelled = append(rep.Cancelled, r.Cancelled...)
			mu.Unlock()
			switch {
			case err != nil:
				keep(id, err)
				return
			case len(r.Waiting) > 0:
				keep(id, nil)
				return
			}
			if kept, err := s.Unlist(ctx, id, r.Version); err != nil || kept {
				keep(id, err)
			}
		})
	}
	wg.Wait()
	return rep, done, errors.Join(errs...)
}

// sweepReleasesAtOnce is how many parents of a page the sweep releases at
// once: one after another, a run of the sweep could not release the ends
// the markers stream never delivers at 1,000 continuations a second within
// its time (docs/scale.md), as the chain function releases a stream
// batch's parents at once.
const sweepReleasesAtOnce = 10

// continuationsItems reads the live continuations items of parents (100 a
// BatchGetItem) by parent.
func (s *Store) continuationsItems(ctx context.Context, parents []string) (map[string]continuationsItem, error) {
	out := make(map[string]continuationsItem, len(parents))
	now := s.now()
	err := ddb.BatchGet(ctx, s.client.BatchGetItem, s.table, jobKeys(parents, ContinuationsOfPK), "", func(item map[string]types.AttributeValue) error {
		var list struct {
			continuationsItem
			PK string `dynamodbav:"pk"`
		}
		ok, err := ddb.DecodeLive(item, now, &list)
		if ok {
			out[strings.TrimPrefix(list.PK, ContinuationsOfPK(""))] = list.continuationsItem
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: continuation sweep: %w", err)
	}
	return out, nil
}

// ended reports which of jobs ids have ended (their derived state is
// terminal; a job whose record is gone reads Expired): their records in
// BatchGetItems, their markers in one PeekBatch when the markers store can
// (one Peek each otherwise).
func (s *Store) ended(ctx context.Context, ids []string) (map[string]bool, error) {
	recs, err := s.records(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	live := make([]Job, 0, len(recs))
	for _, id := range ids {
		if j, ok := recs[id]; ok {
			live = append(live, j)
		} else {
			out[id] = true
		}
	}
	views, err := s.viewAll(ctx, live)
	if err != nil {
		return nil, err
	}
	for _, j := range views {
		out[j.ID] = j.State.Terminal()
	}
	return out, nil
}

// viewAll is ViewAll with the store's markers: one PeekBatch when they
// can, else one Peek per record.
func (s *Store) viewAll(ctx context.Context, recs []Job) ([]Job, error) {
	if p, ok := s.markers.(BatchPeeker); ok || s.markers == nil {
		return ViewAll(ctx, p, recs, s.now())
	}
	out := make([]Job, len(recs))
	for i, j := range recs {
		m, has, err := s.markers.Peek(ctx, j.MarkerKey())
		if err != nil {
			return nil, fmt.Errorf("jobs: derive state of %s: %w", j.ID, err)
		}
		out[i] = s.view(j, m, has)
	}
	return out, nil
}

// Unlist takes parent off the continuation sweep's list once nothing waits
// for it: its continuations item leaves the index and gets its TTL, in one
// UpdateItem conditional on the item being at version (the one its release
// read, ReleaseReport.Version): a continuation that joined since keeps the
// parent listed (kept), for a later release or sweep to decide it. Version
// 0 (the release found no live item) takes an expired item off the index.
// The chain function calls it after a release on a parent's end that left
// nothing waiting, the sweep after its own.
func (s *Store) Unlist(ctx context.Context, parent string, version int64) (kept bool, err error) {
	if version == 0 {
		err := s.updateItem(ctx, ContinuationsOfPK(parent), expression.Remove(expression.Name(AttrSweep)),
			expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(s.now().Unix()))))
		if err != nil && !ddb.IsConditionFailed(err) {
			return false, fmt.Errorf("jobs: continuation sweep %s: %w", parent, err)
		}
		return false, nil
	}
	// Nothing waits for the parent any more: its list lives on, for the
	// views that draw the chain and for a redrive of the parent's letter
	// (continuationsLife).
	err = s.updateItem(ctx, ContinuationsOfPK(parent),
		expression.Set(expression.Name(AttrExpiresAt), expression.Value(continuationsLife(s.now()))).Remove(expression.Name(AttrSweep)),
		expression.Name(attrVersion).Equal(expression.Value(version)))
	return conditionFailed(err, "continuation sweep "+parent)
}

// adoptParent lists parent, named on the release 4 list item, in the index
// (when its continuations item still exists).
func (s *Store) adoptParent(ctx context.Context, parent string) error {
	err := s.updateItem(ctx, ContinuationsOfPK(parent), listOn(expression.UpdateBuilder{}, listContinuations, parent),
		expression.AttributeExists(expression.Name(AttrPK)))
	if err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: continuation sweep %s: %w", parent, err)
	}
	return nil
}

// continuationsLife is the TTL of a parent's list once nothing waits for
// it (at now): as long as a settled marker (lifetime.Marker), longer than
// the parent's dead letter is kept once its record is gone (a Failed
// record lives TerminalRetention, its letter 30 days from when it was
// dead-lettered), so a redrive of that letter still finds the list and is
// refused (Lifecycle.Inspect).
func continuationsLife(now time.Time) int64 { return now.Add(lifetime.Marker).Unix() }
