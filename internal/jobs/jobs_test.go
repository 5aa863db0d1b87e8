package jobs

import (
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/marker"
)

func TestPolicyAllows(t *testing.T) {
	states := []State{StatePending, StateEnqueued, StateScheduled, StateProcessing, StateSucceeded, StateFailed, StateExpired}
	want := map[DuplicatePolicy]map[State]bool{
		AllowAfterFailed: {StateSucceeded: true, StateFailed: true, StateExpired: true},
		RejectIfFailed:   {StateSucceeded: true, StateExpired: true},
		RejectAlways:     {},
	}
	for _, p := range Policies {
		for _, s := range states {
			if got := p.Allows(s); got != want[p][s] {
				t.Errorf("%s.Allows(%s) = %v; want %v", p, s, got, want[p][s])
			}
		}
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want DuplicatePolicy
		ok   bool
	}{
		{"", AllowAfterFailed, true},
		{"AllowAfterFailed", AllowAfterFailed, true},
		{"RejectIfFailed", RejectIfFailed, true},
		{"RejectAlways", RejectAlways, true},
		{"rejectalways", "", false},
		{"Never", "", false},
	}
	for _, tt := range tests {
		got, ok := ParsePolicy(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDerive(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	done := marker.Record{State: marker.StateDone}
	leased := marker.Record{State: marker.StateLeased, LeaseUntil: now.Add(time.Minute)}
	lapsed := marker.Record{State: marker.StateLeased, LeaseUntil: now.Add(-time.Minute)}
	tests := []struct {
		name      string
		stored    State
		runAt     time.Time
		m         marker.Record
		hasMarker bool
		want      State
	}{
		{"enqueued", StateEnqueued, now, marker.Record{}, false, StateEnqueued},
		{"pending", StatePending, now, marker.Record{}, false, StatePending},
		{"scheduled in future", StateScheduled, now.Add(time.Minute), marker.Record{}, false, StateScheduled},
		{"scheduled due", StateScheduled, now.Add(-time.Minute), marker.Record{}, false, StateEnqueued},
		{"leased", StateEnqueued, now, leased, true, StateProcessing},
		{"lease lapsed", StateEnqueued, now, lapsed, true, StateEnqueued},
		{"claimed", StateEnqueued, now, done, true, StateSucceeded},
		{"pending but claimed", StatePending, now, done, true, StateSucceeded},
		{"failed", StateFailed, now, marker.Record{}, false, StateFailed},
		{"failed but claimed", StateFailed, now, done, true, StateSucceeded},
		{"failed long ago", StateFailed, now.Add(-30 * 24 * time.Hour), marker.Record{}, false, StateFailed},
		{"expired", StateEnqueued, now.Add(-QueueRetention), marker.Record{}, false, StateExpired},
		{"expired scheduled", StateScheduled, now.Add(-QueueRetention - time.Hour), marker.Record{}, false, StateExpired},
		{"old but claimed", StateEnqueued, now.Add(-QueueRetention - time.Hour), done, true, StateSucceeded},
		{"not yet expired", StateEnqueued, now.Add(-QueueRetention + time.Second), marker.Record{}, false, StateEnqueued},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Derive(tt.stored, tt.runAt, tt.m, tt.hasMarker, now); got != tt.want {
				t.Fatalf("Derive = %s; want %s", got, tt.want)
			}
		})
	}
}

func TestStateClasses(t *testing.T) {
	for _, s := range []State{StatePending, StateEnqueued, StateScheduled, StateProcessing} {
		if !s.Active() || s.Terminal() {
			t.Errorf("%s: active=%v terminal=%v", s, s.Active(), s.Terminal())
		}
	}
	for _, s := range []State{StateSucceeded, StateFailed, StateExpired} {
		if s.Active() || !s.Terminal() {
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

func TestCleanErrorClass(t *testing.T) {
	tests := map[string]string{
		"":                        "unknown",
		"permanent":               "permanent",
		"bad class\n":             "bad_class_",
		"ü":                       "_",
		string(make([]byte, 100)): string(make([]byte, 0)) + "________________________________________________________________",
	}
	for in, want := range tests {
		if got := cleanErrorClass(in); got != want {
			t.Errorf("cleanErrorClass(%q) = %q; want %q", in, got, want)
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
