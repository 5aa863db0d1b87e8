package jobs

import (
	"slices"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

func TestPolicyAllows(t *testing.T) {
	want := map[contract.DuplicatePolicy]map[State]bool{
		contract.AllowAfterFailed: {StateSucceeded: true, StateFailed: true, StateCancelled: true, StateExpired: true},
		contract.RejectIfFailed:   {StateSucceeded: true, StateCancelled: true, StateExpired: true},
		contract.RejectAlways:     {},
	}
	for _, p := range contract.Policies {
		for _, s := range States {
			if got := Allows(p, s); got != want[p][s] {
				t.Errorf("%s.Allows(%s) = %v; want %v", p, s, got, want[p][s])
			}
		}
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want contract.DuplicatePolicy
		ok   bool
	}{
		{"", contract.AllowAfterFailed, true},
		{"AllowAfterFailed", contract.AllowAfterFailed, true},
		{"RejectIfFailed", contract.RejectIfFailed, true},
		{"RejectAlways", contract.RejectAlways, true},
		{"rejectalways", "", false},
		{"Never", "", false},
	}
	for _, tt := range tests {
		got, ok := contract.ParsePolicy(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// Every derived state: what a caller sees from the record's stored state,
// the run time and the marker.
func TestDerive(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	none := engine.Record{}
	done := engine.Record{State: engine.StateDone}
	failed := engine.Record{State: engine.StateFailed}
	tomb := engine.Record{State: engine.StateCancelled}
	leased := engine.Record{State: engine.StateLeased, LeaseUntil: now.Add(time.Minute)}
	lapsed := engine.Record{State: engine.StateLeased, LeaseUntil: now.Add(-time.Minute)}
	old := now.Add(-QueueRetention - time.Hour)
	tests := []struct {
		name   string
		stored State
		runAt  time.Time
		m      engine.Record
		want   State
	}{
		{"enqueued", StateEnqueued, now, none, StateEnqueued},
		{"pending", StatePending, now, none, StatePending},
		{"scheduled in future", StateScheduled, now.Add(time.Minute), none, StateScheduled},
		{"scheduled due", StateScheduled, now.Add(-time.Minute), none, StateEnqueued},
		{"leased", StateEnqueued, now, leased, StateProcessing},
		{"lease lapsed", StateEnqueued, now, lapsed, StateEnqueued},
		{"claimed", StateEnqueued, now, done, StateSucceeded},
		{"pending but claimed", StatePending, now, done, StateSucceeded},
		{"parked", StateParked, now, none, StateParked},
		{"parked for weeks never expires", StateParked, now.Add(-10 * QueueRetention), none, StateParked},
		{"parked, switch back on, running", StateParked, now, leased, StateProcessing},
		{"parked, then ran", StateParked, old, done, StateSucceeded},
		{"failed", StateFailed, now, none, StateFailed},
		{"failed, then redriven and done", StateFailed, now, done, StateSucceeded},
		{"failed long ago", StateFailed, now.Add(-30 * 24 * time.Hour), none, StateFailed},
		{"effect failed after its claim", StateEnqueued, now, failed, StateFailed},
		{"claim failed after the effect, its lease still running", StateSucceeded, now, leased, StateSucceeded},
		{"claim failed after the effect, lease lapsed", StateSucceeded, now, lapsed, StateSucceeded},
		{"claim failed after the effect, long ago", StateSucceeded, old, none, StateSucceeded},
		{"cancelled record", StateCancelled, now, none, StateCancelled},
		{"tombstone before the record followed", StateEnqueued, now, tomb, StateCancelled},
		{"cancelled long ago", StateCancelled, old, tomb, StateCancelled},
		{"expired", StateEnqueued, now.Add(-QueueRetention), none, StateExpired},
		{"expired scheduled", StateScheduled, old, none, StateExpired},
		{"pending for longer than retention: a retry resumes it", StatePending, old, none, StatePending},
		{"old but claimed", StateEnqueued, old, done, StateSucceeded},
		{"not yet expired", StateEnqueued, now.Add(-QueueRetention + time.Second), none, StateEnqueued},
		{"a continuation waits past any retention", StateAwaitingContinuation, old, none, StateAwaitingContinuation},
		{"a continuation cancelled by its tombstone", StateAwaitingContinuation, now, tomb, StateCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Derive(tt.stored, tt.runAt, tt.m, tt.m.State != "", now); got != tt.want {
				t.Fatalf("Derive = %s; want %s", got, tt.want)
			}
		})
	}
}

// Every transition of the stored state, allowed or refused: a stale worker
// never overwrites a terminal record.
func TestTransition(t *testing.T) {
	stored := []State{StateAwaitingContinuation, StatePending, StateEnqueued, StateScheduled, StateParked, StateSucceeded, StateFailed, StateCancelled}
	events := []Event{EventSent, EventSentDelayed, EventParked, EventFailed, EventCancelled, EventRedriven, EventUnclaimed, EventReleased}
	want := map[State]map[Event]State{
		// A continuation is released once (to Pending, then sent as a new
		// job is) or cancelled; nothing a worker writes touches it.
		StateAwaitingContinuation: {EventReleased: StatePending, EventCancelled: StateCancelled},
		StatePending:              {EventSent: StateEnqueued, EventSentDelayed: StateScheduled, EventParked: StateParked, EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded},
		StateEnqueued:             {EventSent: StateEnqueued, EventSentDelayed: StateScheduled, EventParked: StateParked, EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded},
		StateScheduled:            {EventSent: StateScheduled, EventSentDelayed: StateScheduled, EventParked: StateParked, EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded},
		StateParked:               {EventParked: StateParked, EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded},
		StateSucceeded:            {EventUnclaimed: StateSucceeded},
		StateFailed:               {EventFailed: StateFailed, EventRedriven: StatePending},
		StateCancelled:            {EventCancelled: StateCancelled},
	}
	for _, from := range stored {
		for _, ev := range events {
			got, ok := Transition(from, ev)
			w, wantOK := want[from][ev]
			if ok != wantOK || got != w {
				t.Errorf("Transition(%s, %s) = %s, %v; want %s, %v", from, ev, got, ok, w, wantOK)
			}
			if ok != slices.Contains(Sources(ev), from) {
				t.Errorf("Sources(%s) disagrees with Transition about %s", ev, from)
			}
		}
	}
}

func TestStateClasses(t *testing.T) {
	for _, s := range States {
		active := slices.Contains([]State{StateAwaitingContinuation, StatePending, StateEnqueued, StateScheduled, StateParked, StateProcessing}, s)
		if s.Active() != active || s.Terminal() == active {
			t.Errorf("%s: active=%v terminal=%v", s, s.Active(), s.Terminal())
		}
	}
}

func TestDedupPKIsUnambiguous(t *testing.T) {
	a := DedupPK("a#b", "email.welcome.v1", "k")
	b := DedupPK("a", "b#email.welcome.v1", "k")
	if a == b {
		t.Fatalf("keys collide: %s", a)
	}
	if got := DedupPK("arn:aws:iam::1:user/x", "email.welcome.v1", "welcome:u-1"); got != "dedup#arn:aws:iam::1:user/x#email.welcome.v1#welcome:u-1" {
		t.Fatalf("DedupPK = %s", got)
	}
}

func TestCleanText(t *testing.T) {
	tests := map[string]string{
		"":                        "unknown",
		"permanent":               "permanent",
		" transient Throttling ":  "transient Throttling",
		"bad\nclass":              "bad_class",
		"ü":                       "_",
		string(make([]byte, 100)): "________________________________________________________________",
	}
	for in, want := range tests {
		if got := cleanText(in, 64, "unknown"); got != want {
			t.Errorf("cleanText(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestQueuedState(t *testing.T) {
	now := time.Now()
	if s := (Job{CreatedAt: now, RunAt: now}).QueuedState(); s != StateEnqueued {
		t.Fatalf("no delay: %s", s)
	}
	if s := (Job{CreatedAt: now, RunAt: now.Add(time.Second)}).QueuedState(); s != StateScheduled {
		t.Fatalf("delay: %s", s)
	}
}
