//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// TestAttackCancelCutShortNeverRunsAJobThatReadCancelled: DELETE of a
// waiting continuation made two writes, the tombstone (Store.Cancel:
// markers.Tombstone) and then the record (recordCancel). The earlier
// audit's fix finished the record's write on a *retry* of the DELETE; but a
// cancel cut short between its two writes (the function crashes or times
// out) whose caller does not retry left the record AwaitingContinuation,
// listed on its parent, with no TTL. GET read Cancelled (from the
// tombstone) for the tombstone's life, 30 days from the cancel, since a
// waiting continuation's due is its creation. When the parent ended later
// than that (a parent due in 60 days), the release (which reads the child's
// record, not its marker) moved it to Pending and sent it, and no tombstone
// stopped its worker: a job GET said was Cancelled ran.
//
// The fix writes a waiting continuation's record first (cancelWaiting):
// whichever of the two writes the cancel is cut short at, a job that ever
// read Cancelled is never sent, and one whose cancel failed without effect
// still runs.
func TestAttackCancelCutShortNeverRunsAJobThatReadCancelled(t *testing.T) {
	for _, cut := range []string{"at the record", "at the tombstone"} {
		t.Run(cut, func(t *testing.T) {
			f := jobstest.New(t)
			ctx := context.Background()
			parent := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "parent", 60*24*time.Hour))
			child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
			client, markers := jobs.DynamoAPI(f.Client), jobs.Markers(f.Markers)
			if cut == "at the record" {
				left := 0 // the cancel's reads pass, its record's write fails
				client = budgeted{DynamoAPI: f.Client, left: &left, writesOnly: true}
			} else {
				markers = noTombstone{f.Markers}
			}
			cutShort := jobs.NewStore(client, f.JobsTable, markers)
			cutShort.Now = f.Clock.Now
			if _, err := cutShort.Cancel(ctx, child.ID, "c"); err == nil {
				t.Fatal("a cancel cut short answered no error")
			}
			readCancelled := f.Get(t, child.ID).State == jobs.StateCancelled
			// Sweeps run every five minutes meanwhile (one stands for them all).
			if _, err := f.Store.SweepContinuations(ctx, newSends().send); err != nil {
				t.Fatal(err)
			}
			switch sent, tomb := succeedLater(t, f, parent, child); {
			case readCancelled && sent > 0 && !tomb:
				t.Fatalf("a continuation that read Cancelled (its cancel cut short %s, not retried) was sent %d time(s) "+
					"when its parent succeeded 61 days later, with no tombstone to stop its worker; GET now says %s",
					cut, sent, f.Get(t, child.ID).State)
			case !readCancelled && sent == 0:
				t.Fatalf("a cancel that failed without effect (cut short %s) left a continuation that never runs: it reads %s",
					cut, f.Get(t, child.ID).State)
			}
		})
	}
}

// noTombstone is the markers store with its tombstone's write failing.
type noTombstone struct{ jobs.Markers }

func (noTombstone) Tombstone(context.Context, engine.Key, time.Time) (engine.Record, error) {
	return engine.Record{}, errors.New("markers table unreachable")
}

// budgeted is the jobs table's client of one run of the chain function:
// once its budget of calls is spent, every call fails, as the calls of a
// Lambda past its timeout never happen.
type budgeted struct {
	jobs.DynamoAPI
	left *int
	// writesOnly spends the budget on writes only: every read passes.
	writesOnly bool
}

// call calls f unless the run's budget is spent; under writesOnly a read
// (not write) passes and spends nothing.
func call[I, O any](c budgeted, write bool, f func(context.Context, I, ...func(*dynamodb.Options)) (*O, error),
	ctx context.Context, in I, o []func(*dynamodb.Options)) (*O, error) {
	if write || !c.writesOnly {
		if *c.left <= 0 {
			return nil, context.DeadlineExceeded
		}
		*c.left--
	}
	return f(ctx, in, o...)
}

func (c budgeted) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(c, false, c.DynamoAPI.GetItem, ctx, in, o)
}

func (c budgeted) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return call(c, false, c.DynamoAPI.BatchGetItem, ctx, in, o)
}

func (c budgeted) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(c, true, c.DynamoAPI.UpdateItem, ctx, in, o)
}

func (c budgeted) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return call(c, true, c.DynamoAPI.TransactWriteItems, ctx, in, o)
}

// TestAttackSweepReachesEveryListedParent: SweepContinuations read the
// one list item sweep#continuations and released its parents one by one,
// sequentially, in sorted id order, every run from the first: there was no
// cursor and no time budget. Every parent something waits for stays listed
// until it ends (a parent due a year ahead for a year, a Failed one for 14
// days), so once the list was longer than one run of the chain function
// (30 s) reaches, each run stopped at the same place and the parents after
// it were never reached again. Their continuations are exactly the ones
// only the sweep decides (an expired parent, a dropped letter, a release or
// an enqueue cut short): they waited forever. Here the parents are listed
// in one shard of the index and one run has time for three pages of one
// parent; the expired parent sorted after the others must still be decided
// within an hour of sweeps.
//
// A fix must guarantee that every listed parent is reached within a bounded
// number of runs however many are listed (a cursor kept between runs, a
// randomized or rotating start, a fan-out of the list, parents not listed
// until they can need the sweep).
func TestAttackSweepReachesEveryListedParent(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	ids := sameShard("continuations", 4)
	for i := 1; i <= 3; i++ {
		j := f.Job("email.welcome.v1", "c", fmt.Sprintf("later-%d", i), 300*24*time.Hour)
		j.ID = ids[i-1]
		p := jobstest.Enqueue(t, f.Store, j)
		continuation(t, f, "c", fmt.Sprintf("after-later-%d", i), p.ID, contract.OnSucceeded)
	}
	gone := f.Job("email.welcome.v1", "c", "gone", 0)
	gone.ID = ids[3]
	gone = jobstest.Enqueue(t, f.Store, gone)
	orphan := continuation(t, f, "c", "orphan", gone.ID, contract.OnSucceeded)
	f.Clock.Advance(jobs.QueueRetention + time.Hour) // gone expired without running
	budget := &pageBudget{SweepIndex: f.Store.Index}
	swept := jobs.NewStore(f.Client, f.JobsTable, f.Markers)
	swept.Now, swept.Index = f.Clock.Now, budget
	swept.SweepWindow = 1 // a page is one parent; a run has time for three
	for range 12 {        // an hour of sweeps, each cut off by its run's time
		budget.left = 3
		_, _ = swept.SweepContinuations(ctx, newSends().send)
		f.Clock.Advance(5 * time.Minute)
	}
	if got := f.Get(t, orphan.ID); got.State == jobs.StateAwaitingContinuation {
		rep, err := f.Store.SweepContinuations(ctx, newSends().send)
		t.Fatalf("after an hour of sweeps the continuation of an expired parent still reads %s: every run stopped at the same "+
			"place in the sorted list and never reached its parent %s (one unbounded sweep decides it: cancelled %v, %v)",
			got.State, gone.ID, rep.Cancelled, err)
	}
}

// racedClient runs before, once, ahead of the first write it is asked for:
// what another function did between a call's read and its write.
type racedClient struct {
	jobs.DynamoAPI
	before func()
}

func (c *racedClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if b := c.before; b != nil {
		c.before = nil
		b()
	}
	return c.DynamoAPI.UpdateItem(ctx, in, o...)
}

// A cancel that read its continuation waiting, while the chain function's
// release moves it, sends it and its worker runs it before the cancel
// writes: the cancel (its record's write conditional on the job still
// waiting) is refused with the job's state, Succeeded, and no read ever
// calls the job that ran Cancelled.
func TestCancelRacingTheReleaseNeverCallsAJobThatRanCancelled(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "parent", 0))
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	succeed(t, f, parent)
	raced := &racedClient{DynamoAPI: f.Client, before: func() {
		s := newSends()
		if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil || s.count(child.ID) != 1 {
			t.Errorf("the racing release: %v, sent %d", err, s.count(child.ID))
		}
		succeed(t, f, child)
	}}
	st := jobs.NewStore(raced, f.JobsTable, f.Markers)
	st.Now = f.Clock.Now
	got, err := st.Cancel(ctx, child.ID, "c")
	if !errors.Is(err, jobs.ErrConflict) || got.State != jobs.StateSucceeded {
		t.Fatalf("cancel = %s, %v; want ErrConflict with Succeeded", got.State, err)
	}
	if j := f.Get(t, child.ID); j.State != jobs.StateSucceeded {
		t.Fatalf("GET says %s for a job that ran", j.State)
	}
}
