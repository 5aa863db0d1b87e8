package jobtypes_test

import (
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobtypes"
	"testing"
)

// The shipped job types, as the docs' table of job types lists them.
func TestShippedTypes(t *testing.T) {
	reg := jobtypes.Registry()
	table := []struct {
		name    string
		queue   engine.Queue
		enabled bool
		key     string
		// whileOff is what it does while its switch is off.
		whileOff engine.WhileOff
	}{
		{"email.partner-verification.v1", contract.QueueCritical, true, "partner-verification:u-123", engine.Park},
		{"email.password-reset.v1", contract.QueueCritical, true, "password-reset:u-123", engine.Park},
		{"email.welcome.v1", contract.QueueDefault, true, "welcome:u-123", engine.Park},
		{"email.partner-digest.v1", contract.QueueBulk, false, "partner-digest:u-123:2026-W48", engine.Park},
		{"email.partner-digest-fanout.v1", contract.QueueBulk, false, "partner-digest-fanout:2026-W48", engine.Skip},
		{"runstwice.schedule-sweep.v1", contract.QueueDefault, true, "schedule-sweep:20261202T1000Z", engine.Skip},
	}
	for _, tc := range table {
		jt, err := reg.Lookup(tc.name)
		if err != nil || jt.Queue != tc.queue || jt.EnabledByDefault != tc.enabled || jt.Bias != engine.EffectThenClaim || !jt.Lease ||
			jt.WhileOff != tc.whileOff {
			t.Errorf("%s = %+v, %v; want queue %s enabled %v effect-then-claim with lease", tc.name, jt, err, tc.queue, tc.enabled)
			continue
		}
		got := jt.DeriveKey(map[string]string{"userId": "u-123", "roleCode": "r", "countryCode": "BD", "digestId": "2026-W48", "hour": "20261202T1000Z"})
		if got != tc.key || !engine.ValidKey(got) {
			t.Errorf("%s key = %q; want %q", tc.name, got, tc.key)
		}
	}
	if n := len(reg.Names()); n != len(table) {
		t.Errorf("%d shipped types; this test names %d: add the new one to its table (and to docs/job-types.md)", n, len(table))
	}
}
