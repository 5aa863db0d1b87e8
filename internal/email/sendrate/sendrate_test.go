package sendrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/sendrate"
)

// t0 is the schedules' epoch in these tests.
var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// checkSchedule is what every schedule does (Memory here, the DynamoDB
// table in the integration test), at 2 mails a second: slots 500 ms apart,
// booked after every slot booked before, none after a booking's latest,
// and a schedule whose slots have passed starts again at the booking's
// start.
func checkSchedule(t *testing.T, slots email.Slots) {
	t.Helper()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := time.Millisecond
	for _, tc := range []struct {
		name          string
		n             int
		start, latest time.Duration
		first         time.Duration
		count         int
		free          time.Duration
	}{
		{"an empty schedule starts at the booking's start", 3, 0, 10 * time.Second, 0, 3, 1500 * ms},
		{"a busy one after the slots booked before", 2, 200 * ms, 10 * time.Second, 1500 * ms, 2, 2500 * ms},
		{"no slot after latest", 10, 200 * ms, 4 * time.Second, 2500 * ms, 4, 4500 * ms},
		{"full up to latest: none, and when it frees up", 1, 300 * ms, 4200 * ms, 4500 * ms, 0, 4500 * ms},
		{"slots passed: it starts again", 1, 60 * time.Second, 70 * time.Second, 60 * time.Second, 1, 60500 * ms},
	} {
		b, err := slots.Reserve(context.Background(), tc.n, at(tc.start), at(tc.latest))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if b.Count != tc.count || !b.Free.Equal(at(tc.free)) || b.Interval != 500*ms || (tc.count > 0 && !b.First.Equal(at(tc.first))) {
			t.Errorf("%s: booked %+v; want %d from %v, free at %v, 500ms apart", tc.name, b, tc.count, tc.first, tc.free)
		}
	}
}

func TestMemorySchedule(t *testing.T) { checkSchedule(t, sendrate.NewMemory(2)) }

// The interval rounds up, so no second holds more slots than the rate.
func TestInterval(t *testing.T) {
	for rate, want := range map[float64]time.Duration{1: time.Second, 14: 71428572, 100: 10 * time.Millisecond, 3: 333333334} {
		if got := sendrate.Interval(rate); got != want {
			t.Errorf("Interval(%v) = %v; want %v", rate, got, want)
		}
		if got := time.Duration(rate) * sendrate.Interval(rate); got < time.Second {
			t.Errorf("%v slots of Interval(%v) span %v, under a second", rate, rate, got)
		}
	}
}
