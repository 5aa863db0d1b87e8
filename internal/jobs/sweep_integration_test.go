//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

const day = 24 * time.Hour

// scheduled is a job due in ahead whose message carries its runAt, as the
// enqueue function builds one that waits in a one-time schedule.
func scheduled(t *testing.T, f *jobstest.World, key string, ahead time.Duration) jobs.Job {
	t.Helper()
	j := f.Job("email.welcome.v1", "c", key, ahead)
	env := message.Envelope{V: message.Version, MessageID: j.ID, Type: j.Type, Key: key, CorrelationID: j.CorrelationID,
		Args: map[string]string{"userId": "u-1"}, EnqueuedAt: j.CreatedAt, RunAt: j.RunAt}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	j.Message = string(body)
	return j
}

// A cancel whose schedule delete failed leaves the job on the sweep's list,
// and the sweep deletes the schedule later without a client's retry; then
// the list is empty. The tombstone meanwhile outlives the schedule's
// firing, however far ahead: a firing 200 days on still finds it.
func TestCancelWhoseDeleteFailedIsSweptAndGuarded(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	far := jobstest.Enqueue(t, f.Store, scheduled(t, f, "far", 200*day))
	if _, err := f.Store.Cancel(ctx, far.ID, "c"); err == nil {
		t.Fatal("cancel succeeded although its schedule could not be deleted")
	}
	// The caller gives up. A day later the sweep runs.
	f.Clock.Advance(day)
	d.err = nil
	rep, err := f.Store.SweepSchedules(ctx)
	if err != nil || rep.Listed != 1 || !slices.Equal(rep.Deleted, []string{far.ID}) {
		t.Fatalf("sweep = %+v, %v; want the far job's schedule deleted", rep, err)
	}
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("second sweep = %+v, %v; want an empty list", rep, err)
	}
	// Had the schedule stayed, it would fire at its runAt: the tombstone
	// (and the record) are still there then, and past its last delivery.
	f.Clock.Advance(far.RunAt.Sub(f.Clock.Now()) + lifetime.SchedulerRetryWindow)
	m, ok, err := f.Markers.Peek(ctx, far.MarkerKey())
	if err != nil || !ok || m.State != "CANCELLED" || m.ExpiresAt.Before(lifetime.LastDelivery(far.RunAt)) {
		t.Fatalf("at the schedule's firing the tombstone is %+v (%v, %v); want CANCELLED until past its last delivery", m, ok, err)
	}
	if j := jobstest.Get(t, f.Store, far.ID); j.State != jobs.StateCancelled {
		t.Fatalf("at the schedule's firing the job reads %s; want Cancelled", j.State)
	}
}

// Run now of a job due in 300 days whose schedule delete failed: the job is
// sent, on the sweep's list, and swept later. Its guards are the run time
// its message carries, not the now it was sent at.
func TestRunNowWhoseDeleteFailedIsSwept(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	far := jobstest.Enqueue(t, f.Store, scheduled(t, f, "far", 300*day))
	send := func(context.Context, jobs.Job) error { return nil }
	if _, _, err := f.Store.RunNow(ctx, far.ID, send); err == nil {
		t.Fatal("run now succeeded although its schedule could not be deleted")
	}
	got := jobstest.Get(t, f.Store, far.ID)
	if got.State != jobs.StateEnqueued || !got.Due().Equal(far.RunAt) {
		t.Fatalf("after run now: %s due %s; want Enqueued, still due %s for its guards", got.State, got.Due(), far.RunAt)
	}
	d.err = nil
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || !slices.Equal(rep.Deleted, []string{far.ID}) {
		t.Fatalf("sweep = %+v, %v; want the run-now job's schedule deleted", rep, err)
	}
}

// A cancel that lands while the job is still Pending (its enqueue is about
// to create its schedule) finds no schedule, and keeps the job on the
// sweep's list: the sweep deletes what the enqueue made, and takes the job
// off only once no enqueue can make it any more.
func TestCancelOfAPendingJobStaysListedUntilItsEnqueueIsOver(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{}
	f.Store.Schedules = d
	pending := jobstest.Reserve(t, f.Store, scheduled(t, f, "racing", 40*day))
	if j, err := f.Store.Cancel(ctx, pending.ID, "c"); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("cancel: %+v, %v", j, err)
	}
	rep, err := f.Store.SweepSchedules(ctx)
	if err != nil || rep.Listed != 1 || !slices.Equal(rep.Kept, []string{pending.ID}) {
		t.Fatalf("sweep right after the cancel = %+v, %v; want the job kept on the list (its enqueue may still make the schedule)", rep, err)
	}
	f.Clock.Advance(jobs.DefaultPendingTimeout + time.Second)
	if _, err := f.Store.SweepSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("sweep after the pending timeout = %+v, %v; want it off the list", rep, err)
	}
	if len(d.asked) < 2 {
		t.Fatalf("schedule deletes %v; want the cancel's and the sweep's", d.asked)
	}
}

// sameShard returns n new job ids that list in one shard of list's index
// (jobs.SweepShardOf), sorted.
func sameShard(list string, n int) []string {
	ids := []string{message.NewMessageID()}
	for len(ids) < n {
		if id := message.NewMessageID(); jobs.SweepShardOf(list, id) == jobs.SweepShardOf(list, ids[0]) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// pageBudget is the index of a run that has time for left pages that list
// anything: past them it shows nothing more, as a run out of time takes on
// no more pages.
type pageBudget struct {
	jobs.SweepIndex
	mu   sync.Mutex
	left int
}

func (b *pageBudget) Page(ctx context.Context, shard, after, through string, limit int) ([]string, bool, error) {
	keys, more, err := b.SweepIndex.Page(ctx, shard, after, through, limit)
	if err != nil || len(keys) == 0 {
		return keys, more, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return nil, false, nil
	}
	b.left--
	return keys, more, nil
}

// A sweep takes on a page of a shard of its index at a time, from where
// the last run stopped and round to the start: with five jobs listed in
// one shard, a page of two and time for one page a run, four runs ask for
// every schedule, the fourth wrapping round, and the cursor moves before
// the page's work, so a run that dies midway does not hold the next one at
// the same place.
func TestSweepTakesOnAWindowFromWhereTheLastRunStopped(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	d := &deleter{err: errors.New("scheduler down")}
	f.Store.Schedules = d
	ids := sameShard("schedules", 5)
	for i, id := range ids {
		j := scheduled(t, f, fmt.Sprintf("w-%d", i), 40*day)
		j.ID = id
		j = jobstest.Enqueue(t, f.Store, j)
		if _, err := f.Store.Cancel(ctx, j.ID, "c"); err == nil {
			t.Fatal("cancel succeeded although its schedule could not be deleted")
		}
	}
	f.Store.SweepWindow = 2
	budget := &pageBudget{SweepIndex: f.Store.Index}
	f.Store.Index = budget
	var runs [][]string
	for range 4 {
		d.asked, budget.left = nil, 1
		rep, err := f.Store.SweepSchedules(ctx)
		if err == nil || rep.Listed != len(d.asked) {
			t.Fatalf("sweep = %+v, %v; want the deletes failing", rep, err)
		}
		runs = append(runs, d.asked)
	}
	want := [][]string{{ids[0], ids[1]}, {ids[2], ids[3]}, {ids[4]}, {ids[0], ids[1]}}
	if !slices.EqualFunc(runs, want, slices.Equal) {
		t.Fatalf("runs asked for %v; want %v", runs, want)
	}
	// With time for every page, one run takes on every job, from where
	// the last stopped.
	d.asked, budget.left = nil, 100
	if rep, _ := f.Store.SweepSchedules(ctx); rep.Listed != 5 || !slices.Equal(d.asked, append(ids[2:], ids[:2]...)) {
		t.Fatalf("an unhurried run took on %d and asked for %v; want all five from the third", rep.Listed, d.asked)
	}
}

// A deployed stack's schedule sweep list item of release 4 is still swept:
// each id on it moves to the index, its schedule is deleted, and the item
// empties.
func TestSweepTakesOverTheListItemOfRelease4(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	s := schedules{}
	f.Store.Schedules = s
	j := jobstest.Enqueue(t, f.Store, scheduled(t, f, "old", 40*day))
	s[j.ID] = true
	if _, err := f.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.JobsTable),
		Key:                       map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.SweepPK}},
		UpdateExpression:          aws.String("ADD jobIds :ids"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{Value: []string{j.ID}}},
	}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Hour)
	rep, err := f.Store.SweepSchedules(ctx)
	if err != nil || !slices.Equal(rep.Deleted, []string{j.ID}) || s[j.ID] {
		t.Fatalf("sweep = %+v, %v; want the schedule of the job on the old list deleted", rep, err)
	}
	out, err := f.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.JobsTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.SweepPK}}})
	if err != nil || out.Item["jobIds"] != nil {
		t.Fatalf("the old list still holds %v (%v); want it emptied", out.Item["jobIds"], err)
	}
	if rep, err := f.Store.SweepSchedules(ctx); err != nil || rep.Listed != 0 {
		t.Fatalf("a second sweep = %+v, %v; want nothing listed", rep, err)
	}
}

// cancelledWithSchedule is a job cancelled while its schedule could not be
// deleted, an hour ago: listed for the schedule sweep, whose deleter d
// has asked for nothing yet.
func cancelledWithSchedule(t *testing.T, f *jobstest.World, d *deleter) jobs.Job {
	t.Helper()
	d.err = errors.New("scheduler down")
	j := jobstest.Enqueue(t, f.Store, scheduled(t, f, "late", 40*day))
	if _, err := f.Store.Cancel(context.Background(), j.ID, "c"); err == nil {
		t.Fatal("cancel succeeded although its schedule could not be deleted")
	}
	f.Clock.Advance(time.Hour)
	d.err, d.asked = nil, nil
	return j
}

// lateIndex reads every Page at once and answers it a second before its
// context's deadline.
type lateIndex struct{ jobs.SweepIndex }

func (l lateIndex) Page(ctx context.Context, shard, after, through string, limit int) ([]string, bool, error) {
	keys, more, err := l.SweepIndex.Page(ctx, shard, after, through, limit)
	if d, ok := ctx.Deadline(); ok {
		time.Sleep(time.Until(d) - time.Second)
	}
	return keys, more, err
}

// A run of the sweep that runs out of time before it takes on a page takes
// on nothing, and says so (Unfinished) instead of passing for a sweep of
// the list: its tick fails and is retried, and the job stays listed until
// a run with time deletes its schedule. (A run that began under five
// seconds before its deadline once reported an empty list while two
// schedules of ended jobs waited, and its tick succeeded.)
func TestASweepOutOfTimeSaysItIsUnfinished(t *testing.T) {
	f := jobstest.New(t)
	d := &deleter{}
	f.Store.Schedules = d
	j := cancelledWithSchedule(t, f, d)
	index := f.Store.Index
	// The run stops two seconds (a third of its six) before its deadline;
	// its pages come one second before it.
	f.Store.Index = lateIndex{index}
	short, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	rep, err := f.Store.SweepSchedules(short)
	if err != nil || !rep.Unfinished || rep.Covered || rep.Listed != 0 || len(d.asked) != 0 {
		t.Fatalf("a run out of time before its first page = %+v, %v, asked %v; want nothing taken on, Unfinished", rep, err, d.asked)
	}
	f.Store.Index = index
	rep, err = f.Store.SweepSchedules(context.Background())
	if err != nil || rep.Unfinished || !slices.Equal(rep.Deleted, []string{j.ID}) {
		t.Fatalf("a run with time = %+v, %v; want the schedule deleted, finished", rep, err)
	}
}

// A run that begins to walk with less than its margin (five seconds) left
// still gets on with the list: it keeps a third of its time, not five
// seconds. (In the 10,000-job chaos run, the sweeps' ticks began their
// walk with under five seconds of their function's ten left, after a slow
// tick on a loaded emulator; every run stopped at once, took on nothing,
// and failed its tick, which was retried the same way for twenty minutes
// while continuations and schedules of ended jobs waited.)
func TestASweepThatBeginsLateStillTakesOnTheList(t *testing.T) {
	f := jobstest.New(t)
	d := &deleter{}
	f.Store.Schedules = d
	j := cancelledWithSchedule(t, f, d)
	late, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rep, err := f.Store.SweepSchedules(late)
	if err != nil || rep.Unfinished || !slices.Equal(rep.Deleted, []string{j.ID}) {
		t.Fatalf("a run three seconds from its deadline = %+v, %v, asked %v; want the schedule deleted, finished", rep, err, d.asked)
	}
}

// gatedIndex holds every Page until open is closed, and counts them.
type gatedIndex struct {
	jobs.SweepIndex
	open  chan struct{}
	mu    sync.Mutex
	pages int
}

func (g *gatedIndex) Page(ctx context.Context, shard, after, through string, limit int) ([]string, bool, error) {
	g.mu.Lock()
	g.pages++
	g.mu.Unlock()
	<-g.open
	return g.SweepIndex.Page(ctx, shard, after, through, limit)
}

func (g *gatedIndex) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pages
}

// Runs of one sweep in a process go one at a time, and of the runs that
// waited, one walks the list again and the others, asked for before it
// began, are covered by it: three ticks of the schedule sweep in one batch
// query each shard twice, not three times at once.
func TestSweepRunsOfOneListGoOneAtATime(t *testing.T) {
	f := jobstest.New(t)
	f.Store.Schedules = schedules{}
	g := &gatedIndex{SweepIndex: f.Store.Index, open: make(chan struct{})}
	f.Store.Index = g
	ctx := context.Background()
	reps := make([]jobs.SweepReport, 3)
	var wg sync.WaitGroup
	wg.Go(func() { reps[0], _ = f.Store.SweepSchedules(ctx) })
	for g.count() < jobs.SweepShards {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < 3; i++ {
		wg.Go(func() { reps[i], _ = f.Store.SweepSchedules(ctx) })
	}
	time.Sleep(200 * time.Millisecond)
	if n := g.count(); n != jobs.SweepShards {
		t.Fatalf("while the first run walked, %d pages were asked for; want only its %d", n, jobs.SweepShards)
	}
	close(g.open)
	wg.Wait()
	covered := 0
	for _, r := range reps {
		if r.Unfinished {
			t.Fatalf("reports %+v; want every run finished", reps)
		}
		if r.Covered {
			covered++
		}
	}
	if n := g.count(); n != 2*jobs.SweepShards || covered != 1 || reps[0].Covered {
		t.Fatalf("three runs asked for %d pages, %d covered (%+v); want two walks of %d shards and one run covered",
			n, covered, reps, jobs.SweepShards)
	}
}
