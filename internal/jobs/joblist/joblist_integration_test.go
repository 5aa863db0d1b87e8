//go:build integration

package joblist_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/joblist"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/marker/markertest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// world is a jobs table and a markers table, the store enqueue uses and the
// lister, on one clock.
type world struct {
	store   *jobs.Store
	rec     *jobs.Recorder
	lister  *joblist.Lister
	markers *marker.Dynamo
	clock   *markertest.Clock
	counter *testenv.CallCounter
}

func newWorld(t *testing.T) world {
	t.Helper()
	counter := testenv.NewCallCounter()
	client := dynamodb.NewFromConfig(testenv.Moto(t).Config(counter.Option))
	jobsTable, markersTable := testenv.Name(t, "jobs"), testenv.Name(t, "markers")
	testenv.CreateTable(t, client, jobsTable, jobs.AttrPK, "")
	testenv.CreateTable(t, client, markersTable, marker.AttrHandler, marker.AttrMessageKey)
	w := world{clock: markertest.NewClock(time.Now().UTC().Truncate(time.Millisecond)), counter: counter}
	w.markers = marker.NewDynamo(client, markersTable)
	w.markers.Now = w.clock.Now
	w.store = jobs.NewStore(client, jobsTable, w.markers)
	w.rec = jobs.NewRecorder(client, jobsTable)
	w.store.Now = w.clock.Now
	w.lister = joblist.NewLister(client, jobsTable, w.markers)
	w.lister.Now = w.clock.Now
	return w
}

// enqueue creates an Enqueued job the way the enqueue function does.
func (w world) enqueue(t *testing.T, typ, caller, key string) jobs.Job {
	t.Helper()
	now := w.clock.Now()
	j := jobs.Job{ID: contract.NewMessageID(), Caller: caller, Type: typ, Key: key, Queue: string(contract.QueueDefault),
		CorrelationID: "c-" + key, Message: `{"v":1}`, CreatedAt: now, RunAt: now}
	d, err := w.store.Reserve(context.Background(), j, jobs.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve %s: %v %v", key, d.Outcome, err)
	}
	if err := w.store.Promote(context.Background(), d.Job); err != nil {
		t.Fatal(err)
	}
	return d.Job
}

func (w world) failed(t *testing.T, caller, key string) jobs.Job {
	t.Helper()
	j := w.enqueue(t, email.Welcome.Name, caller, key)
	if err := w.rec.MarkFailed(context.Background(), j.ID, jobs.Failure{Class: "max-receives", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	return j
}

func ids(list []joblist.Summary) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}

// TestList: filters select exactly what they say, states are derived from
// the markers (one BatchGetItem), newest first.
func TestList(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	start := w.clock.Now()
	a := w.enqueue(t, email.Welcome.Name, "caller-a", "welcome:u-1") // Enqueued
	w.clock.Advance(time.Minute)
	b := w.failed(t, "caller-a", "welcome:u-2") // Failed
	w.clock.Advance(time.Minute)
	c := w.enqueue(t, email.PasswordReset.Name, "caller-b", "password-reset:u-3") // Succeeded
	if _, err := w.markers.Claim(ctx, c.MarkerKey(), ""); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	d := w.enqueue(t, email.Welcome.Name, "caller-b", "welcome:u-4") // Processing
	if _, err := w.markers.Lease(ctx, d.MarkerKey(), "w1", w.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	w.counter.Reset()
	all, err := w.lister.List(ctx, joblist.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(all), []string{d.ID, c.ID, b.ID, a.ID}; !slices.Equal(got, want) {
		t.Fatalf("List = %v; want newest first %v", got, want)
	}
	if w.counter.Get("DynamoDB.BatchGetItem") != 1 || w.counter.Get("DynamoDB.GetItem") != 0 {
		t.Fatalf("calls %s; want one BatchGetItem for the markers", w.counter)
	}
	want := map[string]jobs.State{a.ID: jobs.StateEnqueued, b.ID: jobs.StateFailed, c.ID: jobs.StateSucceeded, d.ID: jobs.StateProcessing}
	for _, s := range all {
		if s.State != want[s.ID] {
			t.Errorf("%s (%s) reads %s; want %s", s.ID, s.Key, s.State, want[s.ID])
		}
		if s.CreatedAt.IsZero() || s.Caller == "" || s.Key == "" {
			t.Errorf("summary %+v lacks fields", s)
		}
	}
	for _, tc := range []struct {
		name string
		f    joblist.Filter
		want []string
	}{
		{"type", joblist.Filter{Type: email.PasswordReset.Name}, []string{c.ID}},
		{"state", joblist.Filter{State: jobs.StateFailed}, []string{b.ID}},
		{"type and state", joblist.Filter{Type: email.Welcome.Name, State: jobs.StateEnqueued}, []string{a.ID}},
		{"since", joblist.Filter{Since: start.Add(2 * time.Minute)}, []string{d.ID, c.ID}},
		{"since, exactly at a creation", joblist.Filter{Since: start.Add(time.Minute)}, []string{d.ID, c.ID, b.ID}},
		{"nothing", joblist.Filter{Type: "email.none.v1"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := w.lister.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("List(%+v) = %v; want %v", tc.f, ids(got), tc.want)
			}
		})
	}
}

// TestAttributes: every attribute of the record, whatever it is, and not
// found for an unknown or expired job.
func TestAttributes(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	j := w.failed(t, "caller-a", "welcome:u-9")
	attrs, err := w.lister.Attributes(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pk", "jobId", "caller", "type", "key", "state", "queue", "correlationId", "message",
		"attempts", "lastErrorClass", "createdAt", "updatedAt", "runAt", "failedAt", "expiresAt"} {
		if _, ok := attrs[name]; !ok {
			t.Errorf("attribute %s missing from %v", name, attrs)
		}
	}
	if attrs["state"] != string(jobs.StateFailed) {
		t.Errorf("state = %v", attrs["state"])
	}
	if _, err := w.lister.Attributes(ctx, contract.NewMessageID()); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("unknown job: %v; want ErrNotFound", err)
	}
	w.clock.Advance(jobs.TerminalRetention + time.Second)
	if _, err := w.lister.Attributes(ctx, j.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("expired job: %v; want ErrNotFound", err)
	}
}
