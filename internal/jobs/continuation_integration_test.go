//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// sends counts what a release sends, by job id; err fails every send.
type sends struct {
	mu  sync.Mutex
	n   map[string]int
	err error
}

func newSends() *sends { return &sends{n: map[string]int{}} }

func (s *sends) send(_ context.Context, j jobs.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.n[j.ID]++
	return nil
}

func (s *sends) count(id string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.n[id] }

// continuation reserves a job of caller waiting for parent under policy.
func continuation(t *testing.T, f *jobstest.World, caller, key, parent string, policy contract.AfterPolicy) jobs.Job {
	t.Helper()
	j := f.Job("email.welcome.v1", caller, key, 0)
	j.After, j.AfterPolicy = parent, policy
	d, err := f.Store.Reserve(context.Background(), j, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved || d.Job.Stored() != jobs.StateAwaitingContinuation {
		t.Fatalf("reserve the continuation %s: %v %v %s", key, d.Outcome, err, d.Job.Stored())
	}
	return d.Job
}

// succeed claims the marker of job j, as its worker does.
func succeed(t *testing.T, f *jobstest.World, j jobs.Job) {
	t.Helper()
	if _, err := f.Markers.Claim(context.Background(), j.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(f.Clock.Now(), j.RunAt, engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
}

// A continuation waits while its parent runs, and is sent exactly once
// when the parent has succeeded, however often and however concurrently the
// parent's end is released; then it reads Enqueued.
func TestContinuationIsSentOnceWhenItsParentSucceeds(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	if got, err := f.Store.Continuations(ctx, parent.ID); err != nil || !slices.Equal(got, []string{child.ID}) {
		t.Fatalf("the parent's continuations %v %v; want its continuation", got, err)
	}
	if got, err := f.Store.Parents(ctx, []string{child.ID, parent.ID, parent.ID}); err != nil || !slices.Equal(got, []string{parent.ID}) {
		t.Fatalf("Parents = %v %v; want the parent alone, once", got, err)
	}
	if got := f.Get(t, child.ID); got.State != jobs.StateAwaitingContinuation || got.After != parent.ID || got.AfterPolicy != contract.OnSucceeded {
		t.Fatalf("the continuation reads %s after %q policy %q", got.State, got.After, got.AfterPolicy)
	}
	s := newSends()
	rep, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send)
	if err != nil || !slices.Equal(rep.Waiting, []string{child.ID}) || s.count(child.ID) != 0 {
		t.Fatalf("before its parent ended: %+v %v, sent %d; want it waiting", rep, err, s.count(child.ID))
	}
	succeed(t, f, parent)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil {
		t.Fatal(err)
	}
	if n := s.count(child.ID); n != 1 {
		t.Fatalf("the continuation was sent %d times; want once", n)
	}
	if got := f.Get(t, child.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("the continuation reads %s; want Enqueued", got.State)
	}
}

// Every parent end under each policy: both wait while a Failed parent may
// still be redriven (its letter not dropped, its record alive); then
// OnSucceeded runs after a success and is cancelled with a reason naming
// the parent otherwise, and OnAnyEnd runs after any end.
func TestContinuationPolicies(t *testing.T) {
	type end func(t *testing.T, f *jobstest.World, p jobs.Job)
	fail := func(t *testing.T, f *jobstest.World, p jobs.Job) {
		t.Helper()
		if err := f.Recorder.MarkFailed(context.Background(), p.ID, jobs.Failure{Class: "permanent", Reason: "bad", Attempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ends := map[string]end{
		"succeeded": succeed,
		"cancelled": func(t *testing.T, f *jobstest.World, p jobs.Job) {
			if _, err := f.Store.Cancel(context.Background(), p.ID, "c"); err != nil {
				t.Fatal(err)
			}
		},
		"failed, redrivable": fail,
		"failed, its letter dropped": func(t *testing.T, f *jobstest.World, p jobs.Job) {
			fail(t, f, p)
			if err := jobs.NewLifecycle(f.Client, f.JobsTable).MarkDropped(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
		},
		"failed, its record expired": func(t *testing.T, f *jobstest.World, p jobs.Job) {
			fail(t, f, p)
			f.Clock.Advance(lifetime.TerminalRecord + time.Hour)
		},
		"expired": func(t *testing.T, f *jobstest.World, p jobs.Job) {
			f.Clock.Advance(jobs.QueueRetention + time.Hour)
		},
	}
	want := map[string]map[contract.AfterPolicy]jobs.State{
		"succeeded":                  {contract.OnSucceeded: jobs.StateEnqueued, contract.OnAnyEnd: jobs.StateEnqueued},
		"cancelled":                  {contract.OnSucceeded: jobs.StateCancelled, contract.OnAnyEnd: jobs.StateEnqueued},
		"failed, redrivable":         {contract.OnSucceeded: jobs.StateAwaitingContinuation, contract.OnAnyEnd: jobs.StateAwaitingContinuation},
		"failed, its letter dropped": {contract.OnSucceeded: jobs.StateCancelled, contract.OnAnyEnd: jobs.StateEnqueued},
		"failed, its record expired": {contract.OnSucceeded: jobs.StateCancelled, contract.OnAnyEnd: jobs.StateEnqueued},
		"expired":                    {contract.OnSucceeded: jobs.StateCancelled, contract.OnAnyEnd: jobs.StateEnqueued},
	}
	for name, endIt := range ends {
		for _, policy := range contract.AfterPolicies {
			t.Run(name+"/"+string(policy), func(t *testing.T) {
				f := jobstest.New(t)
				parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
				child := continuation(t, f, "c", "child", parent.ID, policy)
				endIt(t, f, parent)
				s := newSends()
				if _, err := f.Store.ReleaseContinuations(context.Background(), parent.ID, s.send); err != nil {
					t.Fatal(err)
				}
				got := f.Get(t, child.ID)
				if got.State != want[name][policy] {
					t.Fatalf("the continuation reads %s (%s); want %s", got.State, got.LastReason, want[name][policy])
				}
				sent := s.count(child.ID)
				if (got.State == jobs.StateEnqueued) != (sent == 1) || sent > 1 {
					t.Fatalf("sent %d times, reading %s", sent, got.State)
				}
				if got.State == jobs.StateCancelled && (got.LastOutcome != jobs.OutcomeCancelled || !strings.Contains(got.LastReason, parent.ID)) {
					t.Fatalf("cancelled with %q %q; want a reason naming its parent", got.LastOutcome, got.LastReason)
				}
			})
		}
	}
}

// A continuation of another caller's job, or of none, is refused; so is
// the 101st continuation of one job, until one of them is cancelled.
func TestContinuationRefusals(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	for _, tc := range []struct{ caller, after string }{{"other", parent.ID}, {"c", "00000000-0000-4000-8000-000000000000"}} {
		j := f.Job("email.welcome.v1", tc.caller, "k-"+tc.caller, 0)
		j.After, j.AfterPolicy = tc.after, contract.OnSucceeded
		if _, err := f.Store.Reserve(ctx, j, contract.AllowAfterFailed); !errors.Is(err, jobs.ErrParentNotFound) {
			t.Fatalf("caller %s after %s: %v; want ErrParentNotFound", tc.caller, tc.after, err)
		}
		if _, err := f.Store.Get(ctx, j.ID); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("a refused continuation left a record: %v", err)
		}
	}
	var first jobs.Job
	for i := range jobs.MaxContinuations {
		c := continuation(t, f, "c", "k"+string(rune('A'+i/26))+string(rune('a'+i%26)), parent.ID, contract.OnSucceeded)
		if i == 0 {
			first = c
		}
	}
	extra := f.Job("email.welcome.v1", "c", "one-too-many", 0)
	extra.After = parent.ID
	if _, err := f.Store.Reserve(ctx, extra, contract.AllowAfterFailed); !errors.Is(err, jobs.ErrTooManyContinuations) {
		t.Fatalf("the %dth continuation: %v; want ErrTooManyContinuations", jobs.MaxContinuations+1, err)
	}
	if _, err := f.Store.Cancel(ctx, first.ID, "c"); err != nil {
		t.Fatal(err)
	}
	if d, err := f.Store.Reserve(ctx, extra, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("after one was cancelled: %v %v; want room for one more", d.Outcome, err)
	}
}

// A release whose send failed after it moved the continuation out of
// waiting leaves it Pending, marked so; the next release, here the
// continuation sweep, sends it at once (no release is sending it), and
// once. A parent that expired without running is decided by the sweep too.
func TestContinuationSweepFinishesWhatNoMarkerShows(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	gone := f.Enqueue(t, "email.welcome.v1", "c", "gone")
	orphan := continuation(t, f, "c", "orphan", gone.ID, contract.OnSucceeded)
	succeed(t, f, parent)
	s := newSends()
	s.err = errors.New("queue down")
	if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err == nil {
		t.Fatal("a release whose send failed said nothing")
	}
	if got := f.Get(t, child.ID); got.State != jobs.StatePending {
		t.Fatalf("after a failed send the continuation reads %s; want Pending", got.State)
	}
	s.err = nil
	rep, err := f.Store.SweepContinuations(ctx, s.send)
	if err != nil || s.count(child.ID) != 1 || slices.Contains(rep.Kept, parent.ID) {
		t.Fatalf("within the pending timeout: %+v %v, sent %d; want it sent at once (its send failed: no release is sending it)", rep, err, s.count(child.ID))
	}
	f.Clock.Advance(jobs.QueueRetention + time.Hour) // past the pending timeout; gone expires
	rep, err = f.Store.SweepContinuations(ctx, s.send)
	if err != nil || s.count(child.ID) != 1 {
		t.Fatalf("sweep: %+v %v, sent %d; want the continuation sent once", rep, err, s.count(child.ID))
	}
	if got := f.Get(t, child.ID); got.State != jobs.StateEnqueued && got.State != jobs.StateExpired {
		t.Fatalf("the continuation reads %s; want it sent", got.State)
	}
	if got := f.Get(t, orphan.ID); got.State != jobs.StateCancelled || !strings.Contains(got.LastReason, gone.ID) || !strings.Contains(got.LastReason, "ended Expired") {
		t.Fatalf("the continuation of an expired parent reads %s %q; want Cancelled naming it", got.State, got.LastReason)
	}
	if rep.Parents != 1 || len(rep.Kept) != 0 {
		t.Fatalf("sweep %+v; want the expired parent (the other was taken off by the first sweep) decided and off the list", rep)
	}
	if rep, _ = f.Store.SweepContinuations(ctx, s.send); rep.Parents != 0 || s.count(child.ID) != 1 {
		t.Fatalf("a second sweep saw %d parents and sent %d; want none and once", rep.Parents, s.count(child.ID))
	}
}

// A chain: each link waits for the one before and is sent once, when that
// one has succeeded.
func TestChainRunsLinkByLink(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	links := []jobs.Job{f.Enqueue(t, "email.welcome.v1", "c", "link-0")}
	for i := 1; i < 4; i++ {
		links = append(links, continuation(t, f, "c", "link-"+string(rune('0'+i)), links[i-1].ID, contract.OnSucceeded))
	}
	s := newSends()
	for i := range 3 {
		succeed(t, f, links[i])
		for range 2 { // the end seen twice
			if _, err := f.Store.ReleaseContinuations(ctx, links[i].ID, s.send); err != nil {
				t.Fatal(err)
			}
		}
		for j := 1; j < len(links); j++ {
			if want := map[bool]int{true: 1}[j <= i+1]; s.count(links[j].ID) != want {
				t.Fatalf("after link %d succeeded, link %d was sent %d times; want %d", i, j, s.count(links[j].ID), want)
			}
		}
	}
}

// releaseType is a job whose effect is releasing the continuations of its
// scenario's parent: the parent-end path, driven by the kit.
var releaseType = message.JobType{
	Name: "test.release.v1", Args: []message.ArgSpec{{Name: "n", Format: message.FormatID, Required: true}},
	Queue: "q", EnabledByDefault: true, Bias: engine.EffectThenClaim, Lease: true, KeyPrefix: "release", KeyArgs: []string{"n"},
}

// The parent-end path runs twice and converges: enginetest.RunTwice, strict,
// drives a handler that releases a parent's continuations (each scenario
// its own succeeded parent and waiting continuation, made on moto the first
// time the scenario's job runs) through the runner twice in sequence, twice
// at once, and with a crash at every step boundary then a redelivery. The
// continuation is sent exactly once in every scenario, the crash between
// the release and the claim included: the release is its own guard.
func TestReleaseRunsTwiceAndSendsOnce(t *testing.T) {
	f := jobstest.New(t)
	s := newSends()
	var mu sync.Mutex
	children := map[string]string{} // scenario job id → its continuation
	childOf := func(jobID string) string {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := children[jobID]; ok {
			return c
		}
		parent := f.Enqueue(t, "email.welcome.v1", "c", "parent-"+jobID)
		c := continuation(t, f, "c", "child-"+jobID, parent.ID, contract.OnSucceeded)
		succeed(t, f, parent)
		children[jobID] = c.ID
		return c.ID
	}
	handler := runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
		childOf(job.Envelope.MessageID)
		c, err := f.Store.Get(ctx, children[job.Envelope.MessageID])
		if err != nil {
			return err
		}
		_, err = f.Store.ReleaseContinuations(ctx, c.After, s.send)
		return err
	})
	testkit.RunTwice(t, testkit.Case{Type: releaseType, Handler: handler, ExactlyOnce: true,
		Effects: func(jobID string) int { return s.count(childOf(jobID)) }})
}

// A continuation its parent refused after its batch was written is made
// Cancelled with the reason (never a job that runs without waiting); made
// again it is the same job; a key another job holds answers as that job.
func TestReserveRefusedIsCancelledWithItsReason(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Job("email.welcome.v1", "c", "refused", 0)
	j.After, j.AfterPolicy = "5f6b7c1e-8d4e-4a3b-9c2d-1e0f9a8b7c6d", contract.OnSucceeded
	d, err := f.Store.ReserveRefused(ctx, j, "the job it waits for refused it")
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("%v %v", d.Outcome, err)
	}
	got := f.Get(t, j.ID)
	if got.State != jobs.StateCancelled || got.LastOutcome != jobs.OutcomeCancelled || got.LastReason != "the job it waits for refused it" || got.After != j.After {
		t.Fatalf("reads %s %q %q after %q", got.State, got.LastOutcome, got.LastReason, got.After)
	}
	if d, err := f.Store.ReserveRefused(ctx, j, "again"); err != nil || !d.Own || d.Job.ID != j.ID {
		t.Fatalf("again: %v %v own %t", d.Outcome, err, d.Own)
	}
	held := f.Enqueue(t, "email.welcome.v1", "c", "held")
	other := f.Job("email.welcome.v1", "c", "held", 0)
	other.After = j.After
	if d, err := f.Store.ReserveRefused(ctx, other, "refused"); err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != held.ID {
		t.Fatalf("a key held by %s: %v %v %s", held.ID, d.Outcome, err, d.Job.ID)
	}
}

// A release whose send fails leaves the continuation Pending and says so
// (an error, so the markers stream retries the parent's end); the retry
// sends it at once, not after the pending timeout, and once: a third
// release finds it Enqueued.
func TestAReleaseWhoseSendFailedIsSentByTheNextAtOnce(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "parent", 0))
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	succeed(t, f, parent)
	s := newSends()
	s.err = errors.New("SQS down")
	if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err == nil {
		t.Fatal("a release whose send failed answered no error")
	}
	if got := f.Get(t, child.ID); got.State != jobs.StatePending {
		t.Fatalf("after the failed send the continuation reads %s; want Pending", got.State)
	}
	s.err = nil
	for range 2 {
		if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.count(child.ID); n != 1 {
		t.Fatalf("the releases after the failed send sent it %d times; want once, at once", n)
	}
	if got := f.Get(t, child.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("after the retry the continuation reads %s; want Enqueued", got.State)
	}
}

// A parent that failed and is then redriven runs before what waits for
// it, under either policy: its dead-lettering releases nothing, its
// redrive's success releases both. Once its Failed record is gone (and
// the continuations decided as after an Expired parent) a redrive of its
// letter is refused: it would run after what already ran as if after it.
func TestAFailedParentKeepsItsContinuationsUntilItsRedriveSucceeds(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	lc := jobs.NewLifecycle(f.Client, f.JobsTable)
	lc.Now = f.Clock.Now
	parent := f.Failed(t, "email.welcome.v1", "c", "parent")
	anyEnd := continuation(t, f, "c", "any", parent.ID, contract.OnAnyEnd)
	onSuccess := continuation(t, f, "c", "ok", parent.ID, contract.OnSucceeded)
	s := newSends()
	for range 2 { // the chain function on the FAILED marker, then the sweep
		rep, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send)
		if err != nil || len(rep.Sent)+len(rep.Cancelled) != 0 {
			t.Fatalf("release of the Failed parent: %+v %v; want both waiting", rep, err)
		}
	}
	for _, c := range []jobs.Job{anyEnd, onSuccess} {
		if got := f.Get(t, c.ID); got.State != jobs.StateAwaitingContinuation || s.count(c.ID) != 0 {
			t.Fatalf("%s (%s) reads %s, sent %d, while its parent may be redriven; want it waiting",
				c.ID, c.AfterPolicy, got.State, s.count(c.ID))
		}
	}
	f.Clock.Advance(time.Hour)
	rv, err := lc.Inspect(ctx, parent.ID)
	if err != nil || !rv.Revivable() {
		t.Fatalf("Inspect = %+v %v; want it revivable", rv, err)
	}
	if err := lc.Reactivate(ctx, rv, false); err != nil {
		t.Fatal(err)
	}
	if err := lc.Settle(ctx, parent.ID, true); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil || len(rep.Sent) != 0 {
		t.Fatalf("release of the redriven parent before it ran: %+v %v; want nothing sent", rep, err)
	}
	succeed(t, f, parent)
	if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil {
		t.Fatal(err)
	}
	for _, c := range []jobs.Job{anyEnd, onSuccess} {
		if got := f.Get(t, c.ID); got.State != jobs.StateEnqueued || s.count(c.ID) != 1 {
			t.Fatalf("%s (%s) reads %s, sent %d, after its redriven parent succeeded; want sent once", c.ID, c.AfterPolicy, got.State, s.count(c.ID))
		}
	}

	gone := f.Failed(t, "email.welcome.v1", "c", "gone")
	after := continuation(t, f, "c", "after-gone", gone.ID, contract.OnAnyEnd)
	f.Clock.Advance(lifetime.TerminalRecord + time.Hour)
	if rep, err := f.Store.SweepContinuations(ctx, s.send); err != nil || !slices.Contains(rep.Sent, after.ID) {
		t.Fatalf("sweep once the Failed record is gone: %+v %v; want its OnAnyEnd continuation sent", rep, err)
	}
	f.Clock.Advance(lifetime.TerminalRecord) // the letter (30 days) still there
	rv, err = lc.Inspect(ctx, gone.ID)
	if err != nil || !rv.Found || rv.Revivable() {
		t.Fatalf("Inspect of a gone parent whose continuation ran = %+v %v; want it found and not revivable", rv, err)
	}
}
