package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// What the sweeps must look at is listed in the jobs table's sparse index
// sweep, not in a list item: each listed id is the key of an item of its
// own (a parent's continuations item, a job's schedule-sweep entry) that
// carries the attribute sweep, the index's hash key, while it is listed.
// Its value names the list and one of SweepShards shards (a hash of the
// id), so no partition key of the index takes more than its share of the
// listings, and no item holds more than one id: any number of ids is
// listed, and listing one never fails because others are.

// AttrSweep is the attribute, and the index's hash key, that lists an item
// for a sweep: the list and the shard ("continuations#07").
const AttrSweep = "sweep"

// SweepShards is how many partition keys of the index each list spreads
// over: a list's index writes (one when an id is listed, one when it is
// taken off) are SweepShards times below one key's limit (docs/scale.md).
const SweepShards = 16

// The lists.
const (
	listContinuations = "continuations"
	listSchedules     = "schedules"
)

// SweepIndex pages the index sweep (*sweepindex.Index is one): the table
// keys listed in shard, in order, after after and not after through
// (either empty: no bound), at most limit; more reports that others may
// follow.
type SweepIndex interface {
	Page(ctx context.Context, shard, after, through string, limit int) (keys []string, more bool, err error)
}

// sweepShard is the value of AttrSweep that lists id on list.
func sweepShard(list, id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return shardName(list, int(h.Sum32()%SweepShards))
}

func shardName(list string, n int) string { return fmt.Sprintf("%s#%02d", list, n) }

// cursorPK is the key of the item that keeps where the last run of a sweep
// stopped in shard: the last key it took on.
func cursorPK(shard string) string { return "sweep#cursor#" + shard }

// DefaultSweepParallel is how many shards a sweep works on at once
// (Store.SweepParallel).
const DefaultSweepParallel = SweepShards

// sweepMargin is how long before its context's deadline a sweep stops
// taking on pages: the time a page of work takes, with room to spare. A
// run that starts walking with less than three margins left keeps a third
// of what it has instead (stopAt).
const sweepMargin = 5 * time.Second

// walkReport is what one run of a sweep's walk did.
type walkReport struct {
	// Listed counts the keys visit took on.
	Listed int
	// Unfinished: the run stopped for time (or a failure) before it walked
	// every shard to its end; the next run goes on from where it stopped.
	Unfinished bool
	// Covered: the run did not walk, because another run of the same list
	// in this process started after this one was asked for and walked
	// every shard to its end while this one waited for it.
	Covered bool
}

// walk hands visit every key listed on list, a page (SweepWindow keys) at a
// time; visit returns how many of the page's keys it took on (all of them
// unless it ran out of time, see outOfTime). The shards are walked in
// rounds, one page of each unfinished shard a round (SweepParallel at
// once), so every shard moves on in every run. Each shard starts after
// where the last run stopped in it (its cursor) and wraps round to the
// first key; before it works on a page of a shard that does not fit in
// one, the cursor moves past that page (one UpdateItem of a small item of
// its own), so the next run starts after it even if this one dies midway:
// every listed key is reached within a bounded number of runs, however
// many are listed. A run stops taking on pages sweepMargin before its
// context's deadline, or once two thirds of the time it had when it began
// to walk have passed, whichever comes later (stopAt): a run that starts
// late, after a slow tick or a wait for the run before it, still gets on
// with the list rather than stopping at once, run after run. A page visit
// stopped short moves the cursor back to the last key it took on. A run
// that stops before every shard's end says so (Unfinished), so its caller
// does not count it as a sweep of the list.
//
// The runs of one list in one process go one at a time (a batch of a
// sweep's ticks, after an outage, would otherwise walk the same keys at
// once, each slower for the others); a run that waited while another,
// asked for after it, walked the whole list does not walk it again
// (Covered).
func (s *Store) walk(ctx context.Context, list string, visit visitFunc) (rep walkReport, err error) {
	if s.Index == nil {
		return rep, errors.New("jobs: a sweep needs the index (Store.Index)")
	}
	g := gateOf(s.table, list)
	g.mu.Lock()
	asked := g.started
	g.mu.Unlock()
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		return walkReport{Unfinished: true}, fmt.Errorf("jobs: sweep %s: waiting for the run before it: %w", list, ctx.Err())
	}
	defer func() { <-g.turn }()
	g.mu.Lock()
	if g.covered > asked {
		g.mu.Unlock()
		return walkReport{Covered: true}, nil
	}
	g.started++
	mine := g.started
	g.mu.Unlock()
	at := stopAt(ctx, time.Now())
	out := func() bool { return outOfTime(ctx, at) }

	shards := make([]*shardWalk, SweepShards)
	for i := range shards {
		shards[i] = &shardWalk{name: shardName(list, i)}
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, cmp.Or(s.SweepParallel, DefaultSweepParallel))
	for {
		var round []*shardWalk
		for _, w := range shards {
			if !w.done {
				round = append(round, w)
			}
		}
		if len(round) == 0 || out() {
			break
		}
		var wg sync.WaitGroup
		for _, w := range round {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				n, err := s.step(ctx, w, visit, out)
				mu.Lock()
				defer mu.Unlock()
				rep.Listed += n
				if err != nil {
					errs = append(errs, err)
				}
			}()
		}
		wg.Wait()
	}
	for _, w := range shards {
		rep.Unfinished = rep.Unfinished || !w.done || w.short
	}
	if !rep.Unfinished {
		g.mu.Lock()
		g.covered = max(g.covered, mine)
		g.mu.Unlock()
	}
	return rep, errors.Join(errs...)
}

// sweepGate makes the runs of one sweep in a process go one at a time.
type sweepGate struct {
	turn    chan struct{} // held by the run walking
	mu      sync.Mutex    // guards started and covered
	started uint64        // runs begun
	covered uint64        // the number of the last run that walked every shard to its end
}

// gates holds the gate of each table's list.
var gates sync.Map

func gateOf(table, list string) *sweepGate {
	g, _ := gates.LoadOrStore(table+"/"+list, &sweepGate{turn: make(chan struct{}, 1)})
	return g.(*sweepGate)
}

// stopAt is when a run of a sweep that begins to walk at now stops taking
// on work: sweepMargin before ctx's deadline, or, with less than three
// margins left, once two thirds of what is left have passed. Zero: ctx has
// no deadline.
func stopAt(ctx context.Context, now time.Time) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return d.Add(-min(sweepMargin, d.Sub(now)/3))
}

// outOfTime reports whether a sweep must stop taking on work: ctx is done
// or its stop time (stopAt) has come.
func outOfTime(ctx context.Context, at time.Time) bool {
	return ctx.Err() != nil || (!at.IsZero() && !time.Now().Before(at))
}

// shardWalk is where a run is in one shard: the cursor it started from,
// the phase (the keys after the cursor, then those up to it) and the key
// the next page starts after.
type shardWalk struct {
	name    string
	started bool
	cursor  string
	wrapped bool
	after   string
	pages   int
	done    bool
	short   bool // stopped before its end: out of time, or a failure
}

// visitFunc takes on keys, a page of a sweep's index, and returns how many
// of them (from the first) it took on: fewer when out reported the run out
// of time before it took on the next.
type visitFunc func(ctx context.Context, keys []string, out func() bool) (done int, err error)

// step takes on the next page of shard w: it reads the shard's cursor
// first, moves it past the page unless the page is the whole shard, and
// hands the page to visit; a visit stopped short moves the cursor back to
// the last key taken on and ends the shard's walk for this run, and so
// does a failure to read the index or move the cursor.
func (s *Store) step(ctx context.Context, w *shardWalk, visit visitFunc, out func() bool) (int, error) {
	if !w.started {
		w.started = true
		var c struct {
			Cursor string `dynamodbav:"cursor"`
		}
		if _, err := s.getItem(ctx, cursorPK(w.name), &c); err != nil {
			w.done, w.short = true, true
			return 0, err
		}
		w.cursor, w.after = c.Cursor, c.Cursor
	}
	through := ""
	if w.wrapped {
		through = w.cursor
	}
	before := w.after
	keys, more, err := s.Index.Page(ctx, w.name, before, through, cmp.Or(s.SweepWindow, DefaultSweepWindow))
	if err != nil {
		w.done, w.short = true, true
		return 0, fmt.Errorf("jobs: sweep %s: %w", w.name, err)
	}
	w.pages++
	whole := w.cursor == "" && w.pages == 1 && !more
	switch {
	case more:
		w.after = keys[len(keys)-1]
	case w.wrapped || w.cursor == "":
		w.done = true
	default: // past the last key: on to those up to the cursor
		w.wrapped, w.after = true, ""
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if !whole {
		if err := s.setCursor(ctx, w.name, keys[len(keys)-1]); err != nil {
			w.done, w.short = true, true
			return 0, err
		}
	}
	done, err := visit(ctx, keys, out)
	if done < len(keys) {
		w.done, w.short = true, true
		back := before
		if done > 0 {
			back = keys[done-1]
		}
		err = errors.Join(err, s.setCursor(ctx, w.name, back))
	}
	return done, err
}

// setCursor moves the cursor of shard to key: the next run starts after it.
func (s *Store) setCursor(ctx context.Context, shard, key string) error {
	if err := s.setItem(ctx, cursorPK(shard), expression.Set(expression.Name(attrCursor), expression.Value(key))); err != nil {
		return fmt.Errorf("jobs: sweep %s cursor: %w", shard, err)
	}
	return nil
}

// setItem applies upd to the item pk, creating it if need be: one
// unconditional UpdateItem.
func (s *Store) setItem(ctx context.Context, pk string, upd expression.UpdateBuilder) error {
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyAV(pk), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	return err
}

// listOn adds to upd the listing of id on list (SET AttrSweep).
func listOn(upd expression.UpdateBuilder, list, id string) expression.UpdateBuilder {
	return upd.Set(expression.Name(AttrSweep), expression.Value(sweepShard(list, id)))
}

// legacyBatch is how many ids of a release 4 list item one run moves to
// the index.
const legacyBatch = 500

// adoptLegacy moves up to legacyBatch ids of the list item pk, the one list
// item a sweep had before the index (release 4; a deployed stack may still
// hold one), to the index: adopt lists each (idempotent), then one
// UpdateItem takes them off the item. A crash between the two leaves them
// on the item, to be adopted again. Taking ids off only shrinks the item,
// so a list at DynamoDB's size limit drains too; nothing is added to it
// any more.
func (s *Store) adoptLegacy(ctx context.Context, pk string, adopt func(ctx context.Context, id string) error) error {
	var legacy struct {
		IDs []string `dynamodbav:"jobIds,stringset"`
	}
	ok, err := s.getItem(ctx, pk, &legacy)
	if err != nil || !ok || len(legacy.IDs) == 0 {
		return err
	}
	ids := slices.Sorted(slices.Values(legacy.IDs))
	ids = ids[:min(len(ids), legacyBatch)]
	var done []string
	var errs []error
	for _, id := range ids {
		if err := adopt(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, id)
	}
	if len(done) > 0 {
		err := s.updateItem(ctx, pk, expression.Delete(expression.Name(attrSweepIDs), expression.Value(&types.AttributeValueMemberSS{Value: done})),
			expression.AttributeExists(expression.Name(AttrPK)))
		if err != nil {
			errs = append(errs, fmt.Errorf("jobs: sweep %s: %w", pk, err))
		}
	}
	return errors.Join(errs...)
}
