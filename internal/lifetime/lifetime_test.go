package lifetime

import (
	"testing"
	"time"
)

func TestUntilIsTheLaterOfFloorAndLastDelivery(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		runAt time.Time
		floor time.Duration
		want  time.Time
	}{
		{"no run time", time.Time{}, Marker, now.Add(Marker)},
		{"due now: the floor", now, Marker, now.Add(Marker)},
		{"due in a year: the floor after its run time", now.Add(MaxRunAhead), Marker, now.Add(MaxRunAhead + Marker)},
		{"a short floor, due in a year: the last delivery", now.Add(MaxRunAhead), StoredAnswer, now.Add(MaxRunAhead + SchedulerRetryWindow + QueueRetention + DLQRetention)},
		{"a short floor, due now: the last delivery", now, StoredAnswer, now.Add(SchedulerRetryWindow + QueueRetention + DLQRetention)},
	}
	for _, c := range cases {
		if got := Until(now, c.runAt, c.floor); !got.Equal(c.want) {
			t.Errorf("%s: Until = %s; want %s", c.name, got, c.want)
		}
	}
}

// Every guard outlives the last delivery it must stop, for any run time a
// job may have.
func TestNoGuardExpiresBeforeTheLastDelivery(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	floors := map[string]time.Duration{"marker": Marker, "terminal record": TerminalRecord, "stored answer": StoredAnswer, "relay decision": RelayDecision}
	for ahead := time.Duration(0); ahead <= MaxRunAhead; ahead += 7 * day {
		runAt := now.Add(ahead)
		for name, floor := range floors {
			if got := Until(now, runAt, floor); got.Before(LastDelivery(runAt)) {
				t.Errorf("%s of a job due in %s expires at %s, before its last delivery %s", name, ahead, got, LastDelivery(runAt))
			}
		}
		if got := ActiveRecord(runAt); got.Before(LastDelivery(runAt)) {
			t.Errorf("the active record of a job due in %s expires at %s, before its last delivery", ahead, got)
		}
	}
	if Marker < QueueRetention+DLQRetention {
		t.Errorf("the marker's floor %s is shorter than a message can live in a work queue and the DLQ", Marker)
	}
	if RelayDecision < OutboxItem+StreamRetention {
		t.Errorf("the relay's decision lives %s, less than an item can be relayed again", RelayDecision)
	}
}
