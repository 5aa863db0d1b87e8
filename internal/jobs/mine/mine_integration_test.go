//go:build integration

package mine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/mine"
)

// A caller's list on moto: its own jobs only, newest first, a page at a
// time with a cursor that ends on the last page; filtered by type and by
// the derived state (a claimed job reads Succeeded); a cursor of another
// caller's list refused; one Query and one BatchGetItem per page.
func TestListsTheCallersOwnJobsNewestFirst(t *testing.T) {
	w := jobstest.New(t)
	ctx := context.Background()
	var mineIDs []string // newest first
	for i := range 7 {
		w.Clock.Advance(time.Second)
		typ := "email.welcome.v1"
		if i%3 == 0 {
			typ = "email.password-reset.v1"
		}
		j := w.Enqueue(t, typ, "caller-a", "k-"+string(rune('a'+i)))
		mineIDs = append([]string{j.ID}, mineIDs...)
		w.Enqueue(t, typ, "caller-b", "k-"+string(rune('a'+i)))
	}
	// The newest job ran: its claim makes it Succeeded.
	if _, err := w.Markers.Claim(ctx, jobs.Job{ID: mineIDs[0], Type: "email.password-reset.v1"}.MarkerKey(), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	l := mine.NewLister(w.Client, w.JobsTable, w.Markers)
	l.Now = w.Clock.Now

	var got []string
	cursor, pages := "", 0
	for {
		w.Counter.Reset()
		page, err := l.List(ctx, jobs.ListQuery{Caller: "caller-a", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if calls := w.Counter.Total(); calls > 2 {
			t.Errorf("page %d took %d calls; want one Query and one BatchGetItem", pages, calls)
		}
		for _, j := range page.Jobs {
			if j.Caller != "caller-a" {
				t.Fatalf("caller-a's list holds %s of %s", j.ID, j.Caller)
			}
			got = append(got, j.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if pages != 3 || len(got) != len(mineIDs) {
		t.Fatalf("%d pages of %v; want 3 pages of %v", pages, got, mineIDs)
	}
	for i := range got {
		if got[i] != mineIDs[i] {
			t.Fatalf("list %v; want newest first %v", got, mineIDs)
		}
	}

	resets, err := l.List(ctx, jobs.ListQuery{Caller: "caller-a", Type: "email.password-reset.v1"})
	if err != nil || len(resets.Jobs) != 3 || resets.Next != "" {
		t.Fatalf("type filter: %+v, %v; want the 3 resets on one page", resets, err)
	}
	done, err := l.List(ctx, jobs.ListQuery{Caller: "caller-a", State: jobs.StateSucceeded, Limit: 1})
	if err != nil || len(done.Jobs) != 1 || done.Jobs[0].ID != mineIDs[0] || done.Next != "" {
		t.Fatalf("state filter: %+v, %v; want the one claimed job and no next page", done, err)
	}
	first, err := l.List(ctx, jobs.ListQuery{Caller: "caller-a", Limit: 2})
	if err != nil || first.Next == "" {
		t.Fatalf("first page %+v, %v", first, err)
	}
	if _, err := l.List(ctx, jobs.ListQuery{Caller: "caller-b", Cursor: first.Next}); !errors.Is(err, jobs.ErrBadCursor) {
		t.Fatalf("caller-b with caller-a's cursor: %v; want ErrBadCursor", err)
	}
	if _, err := l.List(ctx, jobs.ListQuery{Caller: "caller-a", Cursor: "not-a-cursor"}); !errors.Is(err, jobs.ErrBadCursor) {
		t.Fatalf("a made-up cursor: %v; want ErrBadCursor", err)
	}
	none, err := l.List(ctx, jobs.ListQuery{Caller: "caller-c"})
	if err != nil || len(none.Jobs) != 0 || none.Next != "" {
		t.Fatalf("a caller without jobs: %+v, %v", none, err)
	}
}
