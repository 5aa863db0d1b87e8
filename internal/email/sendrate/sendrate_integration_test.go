//go:build integration

package sendrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/sendrate"
)

// jobsTable is a table keyed as the jobs table (pk), where the schedule's
// item lives.
func jobsTable(t *testing.T, counter *testenv.CallCounter) (*dynamodb.Client, string) {
	t.Helper()
	client := testenv.DynamoDB(t)
	if counter != nil {
		client = testenv.DynamoDB(t, counter.Option)
	}
	return client, testenv.NewTable(t, client, "jobs", sendrate.AttrPK, "")
}

// The DynamoDB schedule books as Memory does, with its conditions checked
// by moto.
func TestTableSchedule(t *testing.T) {
	client, table := jobsTable(t, nil)
	checkSchedule(t, sendrate.New(client, table, 2))
}

// Containers whose views of the schedule are stale never book one slot
// twice: each container books on its own last view, the failed condition
// returns the item, and the bookings tile the schedule, one slot per
// interval. The bookings take turns here: moto applies two conditional
// UpdateItems of one item that arrive at once without isolation (both can
// pass the same condition, which DynamoDB never lets happen), so racing
// writes prove nothing against it.
func TestTableBookingsOfContainersNeverOverlap(t *testing.T) {
	client, table := jobsTable(t, nil)
	const containers, rounds = 4, 8
	var views []*sendrate.Table
	for range containers {
		views = append(views, sendrate.New(client, table, 10))
	}
	var bookings []email.Booking
	for i := range containers * rounds {
		c := (i * 7) % containers // an order in which every container's view is stale now and then
		b, err := views[c].Reserve(context.Background(), 1+i%4, t0, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		bookings = append(bookings, b)
	}
	next := t0
	for _, b := range bookings {
		if b.Count == 0 || !b.First.Equal(next) {
			t.Fatalf("booking %+v; want slots from %v, right after the one before (bookings %+v)", b, next, bookings)
		}
		next = b.First.Add(time.Duration(b.Count) * b.Interval)
	}
}

// A booking costs one UpdateItem when the container's last view of the
// schedule holds, two when another container moved it meanwhile (the failed
// condition returns the item, so the second write is right).
func TestTableCallsPerBooking(t *testing.T) {
	counter := testenv.NewCallCounter()
	client, table := jobsTable(t, counter)
	a, b := sendrate.New(client, table, 10), sendrate.New(client, table, 10)
	ctx := context.Background()
	book := func(s *sendrate.Table, n int) int {
		counter.Reset()
		if _, err := s.Reserve(ctx, n, t0, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		return counter.Get("DynamoDB.UpdateItem")
	}
	for _, step := range []struct {
		name  string
		slots *sendrate.Table
		want  int
	}{
		{"the first booking of an empty schedule", a, 1},
		{"the same container again, behind its own booking", a, 1},
		{"another container, which has not seen the schedule", b, 2},
		{"that container again", b, 1},
		{"the first container, after the other moved it", a, 2},
	} {
		if got := book(step.slots, 10); got != step.want {
			t.Errorf("%s: %d UpdateItem; want %d", step.name, got, step.want)
		}
	}
}
