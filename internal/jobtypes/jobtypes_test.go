package jobtypes_test

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobtypes"
)

// The shipped job types pinned, each as the docs' table of job types
// lists it: a change to one's queue, default, bias, lease or key is a
// visible decision. A new type needs no line here (see
// TestEveryTypeDerivesAValidKey).
func TestShippedTypes(t *testing.T) {
	reg := jobtypes.Registry()
	table := []struct {
		name    string
		queue   contract.Queue
		enabled bool
		key     string
		// whileOff is what it does while its switch is off.
		whileOff contract.WhileOff
	}{
		{"email.partner-verification.v1", contract.QueueCritical, true, "partner-verification:u-123", contract.Park},
		{"email.password-reset.v1", contract.QueueCritical, true, "password-reset:u-123", contract.Park},
		{"email.welcome.v1", contract.QueueDefault, true, "welcome:u-123", contract.Park},
		{"email.partner-digest.v1", contract.QueueBulk, false, "partner-digest:u-123:2026-W48", contract.Park},
		{"email.partner-digest-fanout.v1", contract.QueueBulk, false, "partner-digest-fanout:2026-W48", contract.Skip},
		{"runstwice.schedule-sweep.v1", contract.QueueDefault, true, "schedule-sweep:20261202T1000Z", contract.Skip},
		{"webhook.deliver.v1", contract.QueueWebhooks, true, "webhook:e-1", contract.Park},
	}
	for _, tc := range table {
		jt, err := reg.Lookup(tc.name)
		if err != nil || jt.Queue != tc.queue || jt.EnabledByDefault != tc.enabled || jt.Bias != contract.EffectThenClaim || !jt.Lease ||
			jt.WhileOff != tc.whileOff {
			t.Errorf("%s = %+v, %v; want queue %s enabled %v effect-then-claim with lease", tc.name, jt, err, tc.queue, tc.enabled)
			continue
		}
		got := jt.DeriveKey(map[string]string{"userId": "u-123", "roleCode": "r", "countryCode": "BD", "digestId": "2026-W48", "hour": "20261202T1000Z", "eventId": "e-1"})
		if got != tc.key || !contract.ValidKey(got) {
			t.Errorf("%s key = %q; want %q", tc.name, got, tc.key)
		}
	}
}

// Every registered type, the ones TestShippedTypes pins and any added
// since: its valid example args pass its own validation and derive a valid
// natural key under its prefix. No count of types is pinned anywhere: the
// docs' table of types (internal/docs) is what must list every one.
func TestEveryTypeDerivesAValidKey(t *testing.T) {
	for _, jt := range jobtypes.Registry().Types() {
		args := enginetest.ValidArgs(jt)
		if err := jt.ValidateArgs(args); err != nil {
			t.Errorf("%s: its example args %v are refused: %v", jt.Name, args, err)
		}
		if key := jt.DeriveKey(args); !contract.ValidKey(key) || !strings.HasPrefix(key, jt.KeyPrefix+":") {
			t.Errorf("%s: key %q from %v is not a valid key under %s:", jt.Name, key, args, jt.KeyPrefix)
		}
	}
}
