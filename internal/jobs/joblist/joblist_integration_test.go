//go:build integration

package joblist_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/joblist"
	"github.com/runstwice/runstwice/message"
)

// world is the jobs fixture with the lister on its clock.
type world struct {
	*jobstest.World
	lister *joblist.Lister
}

func newWorld(t *testing.T) world {
	t.Helper()
	w := world{World: jobstest.New(t)}
	w.lister = joblist.NewLister(w.Client, w.JobsTable, w.Markers)
	w.lister.Now = w.Clock.Now
	return w
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
	start := w.Clock.Now()
	a := w.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-1") // Enqueued
	w.Clock.Advance(time.Minute)
	b := w.Failed(t, contract.Welcome.Name, "caller-a", "welcome:u-2") // Failed
	w.Clock.Advance(time.Minute)
	c := w.Enqueue(t, contract.PasswordReset.Name, "caller-b", "password-reset:u-3") // Succeeded
	if _, err := w.Markers.Claim(ctx, c.MarkerKey(), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	w.Clock.Advance(time.Minute)
	d := w.Enqueue(t, contract.Welcome.Name, "caller-b", "welcome:u-4") // Processing
	if _, err := w.Markers.Lease(ctx, d.MarkerKey(), engine.Mark{Owner: "w1", Until: w.Clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}

	w.Counter.Reset()
	all, err := w.lister.List(ctx, joblist.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(all), []string{d.ID, c.ID, b.ID, a.ID}; !slices.Equal(got, want) {
		t.Fatalf("List = %v; want newest first %v", got, want)
	}
	if w.Counter.Get("DynamoDB.BatchGetItem") != 1 || w.Counter.Get("DynamoDB.GetItem") != 0 {
		t.Fatalf("calls %s; want one BatchGetItem for the markers", w.Counter)
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
		{"type", joblist.Filter{Type: contract.PasswordReset.Name}, []string{c.ID}},
		{"state", joblist.Filter{State: jobs.StateFailed}, []string{b.ID}},
		{"type and state", joblist.Filter{Type: contract.Welcome.Name, State: jobs.StateEnqueued}, []string{a.ID}},
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
	j := w.Failed(t, contract.Welcome.Name, "caller-a", "welcome:u-9")
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
	if _, err := w.lister.Attributes(ctx, message.NewMessageID()); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("unknown job: %v; want ErrNotFound", err)
	}
	w.Clock.Advance(jobs.TerminalRetention + time.Second)
	if _, err := w.lister.Attributes(ctx, j.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("expired job: %v; want ErrNotFound", err)
	}
}
