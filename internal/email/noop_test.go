package email

import (
	"errors"
	"testing"

	"github.com/runstwice/runstwice/engine"
)

// Every no-op is counted by its own kind of reason, the one the users
// directory alarm watches (user-not-found) among them: none is "other".
func TestNoOpsAreCountedByReason(t *testing.T) {
	reasons := map[string]string{
		reasonUserNotFound:                    NoopUserNotFound,
		"user has no e-mail address":          "user-has-no-e-mail-address",
		"user deleted or confirmed meanwhile": "user-deleted-or-confirmed-meanwhile",
	}
	for _, j := range declared {
		// Each type's own skip reasons, for a user in either state.
		for _, u := range []User{{EmailConfirmed: true}, {EmailConfirmed: false}} {
			if r := j.skip(u); r != "" {
				reasons[r] = ""
			}
		}
	}
	reasons["address not confirmed; no digest to unconfirmed addresses"] = "address-not-confirmed"
	reasons["address already confirmed"] = "address-already-confirmed"
	for reason, want := range reasons {
		var noop *engine.NoOpError
		if err := (&handler{}).noop(reason); !errors.As(err, &noop) {
			t.Fatalf("noop(%q) = %v; want a NoOpError", reason, err)
		}
		if noop.Kind == "" || noop.Kind == "other" || (want != "" && noop.Kind != want) {
			t.Errorf("noop(%q) counts as %q; want %q", reason, noop.Kind, want)
		}
	}
}
