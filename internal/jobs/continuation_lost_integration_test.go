//go:build integration

package jobs_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
)

// dropWorld is the jobs fixture with a second store on it whose DynamoDB
// calls pass the fault injector in front of moto, with the SDK's standard
// retryer (as in a function): a call the injector drops is applied, its
// response lost, and retried by the SDK.
type dropWorld struct {
	*jobstest.World
	in    *faults.Injector
	lossy *jobs.Store
}

func newDropWorld(t *testing.T) dropWorld {
	t.Helper()
	w := dropWorld{World: jobstest.New(t), in: faults.New(nil, 1)}
	ps, err := awsproxy.Start(testenv.Moto(t).Endpoint, w.in.Hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close)
	cfg := moto.Config(ps.URL, testenv.Region)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
		})
	}
	w.lossy = jobs.NewStore(dynamodb.NewFromConfig(cfg), w.JobsTable, w.Markers)
	w.lossy.Now = w.Clock.Now
	return w
}

// drop makes the next DynamoDB call of op whose request holds every one
// of contains be applied with its response lost (kind), and returns the
// check that it was.
func (w dropWorld) drop(t *testing.T, kind faults.Kind, op string, contains ...string) (check func()) {
	before := len(w.in.Events())
	remove := w.in.Add(faults.Rule{Service: "dynamodb", Operation: op, Contains: contains, Kind: kind, P: 1, Limit: 1})
	return func() {
		t.Helper()
		remove()
		ev := w.in.Events()[before:]
		if len(ev) != 1 || !ev[0].Applied || ev[0].Status != http.StatusOK {
			t.Fatalf("faults %+v; want one %s of %s applied upstream (200)", ev, kind, op)
		}
	}
}

// A release whose write out of waiting is applied and its response lost
// finds, on the SDK's retry, its own write, not another release's: it
// sends the continuation itself, at once, and says so (Sent), or cancels
// it and says so. Before, it read its own write as another's and sent
// nothing: the continuation waited Pending for the five-minute sweep.
func TestAReleaseWhoseWriteIsRetriedFindsItsOwn(t *testing.T) {
	for _, kind := range []faults.Kind{faults.Drop, faults.Drop500} {
		for _, tc := range []struct {
			name string
			end  func(t *testing.T, w dropWorld, p jobs.Job)
			want jobs.State
		}{
			{"sent", func(t *testing.T, w dropWorld, p jobs.Job) { succeed(t, w.World, p) }, jobs.StateEnqueued},
			{"cancelled", func(t *testing.T, w dropWorld, p jobs.Job) {
				if _, err := w.Store.Cancel(context.Background(), p.ID, "c"); err != nil {
					t.Fatal(err)
				}
			}, jobs.StateCancelled},
		} {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				w := newDropWorld(t)
				ctx := context.Background()
				parent := w.Enqueue(t, "email.welcome.v1", "c", "parent")
				child := continuation(t, w.World, "c", "child", parent.ID, contract.OnSucceeded)
				tc.end(t, w, parent)
				s := newSends()
				check := w.drop(t, kind, "UpdateItem", jobs.JobPK(child.ID), string(jobs.StateAwaitingContinuation))
				rep, err := w.lossy.ReleaseContinuations(ctx, parent.ID, s.send)
				check()
				decided := rep.Sent
				if tc.want == jobs.StateCancelled {
					decided = rep.Cancelled
				}
				if err != nil || !slices.Equal(decided, []string{child.ID}) {
					t.Fatalf("release = %+v, %v; want the continuation decided (%s) by this release", rep, err, tc.want)
				}
				if got := w.Get(t, child.ID); got.State != tc.want || s.count(child.ID) != map[bool]int{true: 1}[tc.want == jobs.StateEnqueued] {
					t.Fatalf("the continuation reads %s, sent %d; want %s", got.State, s.count(child.ID), tc.want)
				}
			})
		}
	}
}

// A cancel of a waiting continuation whose write is applied and its
// response lost finds its own write on the retry: it finishes the cancel
// (its tombstone, and the continuation leaves its parent's list, so it no
// longer counts against the parent's 100), never "moved on meanwhile".
func TestACancelOfAWaitingContinuationRetriedFindsItsOwn(t *testing.T) {
	w := newDropWorld(t)
	ctx := context.Background()
	parent := w.Enqueue(t, "email.welcome.v1", "c", "parent")
	child := continuation(t, w.World, "c", "child", parent.ID, contract.OnSucceeded)
	check := w.drop(t, faults.Drop, "UpdateItem", jobs.JobPK(child.ID), string(jobs.StateAwaitingContinuation))
	got, err := w.lossy.Cancel(ctx, child.ID, "c")
	check()
	if err != nil || got.State != jobs.StateCancelled {
		t.Fatalf("Cancel = %s, %v; want Cancelled", got.State, err)
	}
	if ids, err := w.Store.Continuations(ctx, parent.ID); err != nil || len(ids) != 0 {
		t.Fatalf("the parent's list %v %v; want the cancelled continuation off it", ids, err)
	}
	if _, ok, err := w.Markers.Peek(ctx, child.MarkerKey()); err != nil || !ok {
		t.Fatalf("the continuation's tombstone: %t %v; want it written", ok, err)
	}
}
