// Package jobtypes is the list of every job type runstwice ships, gathered
// from the use cases that declare them beside their handlers. It sits with
// the wiring, above the use cases it gathers, so its imports point down:
// the functions, jobctl, the producer's client and the dev tools build
// their registry here. Adding a use case with job types means adding it to
// Types.
package jobtypes

import (
	"slices"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/sweep"
	"github.com/runstwice/runstwice/internal/webhook"
)

// Types returns the declaration of every shipped job type.
func Types() []contract.JobType { return typesIn(time.UTC) }

// typesIn is every shipped type, the weekly digest's tick labelled in
// digestZone.
func typesIn(digestZone *time.Location) []contract.JobType {
	return slices.Concat(email.Types(), digest.TypesIn(digestZone), sweep.Types(), webhook.Types())
}

// Registry returns a registry of every shipped job type. The declarations
// are fixed at build time and a test proves they load, so a refused
// declaration is a programming error and panics. A tick of the weekly
// digest is labelled with its week in UTC here: RegistryIn labels it in the
// schedule's time zone, as the e-mail function, which runs the ticks, does.
func Registry() *contract.Registry { return RegistryIn(time.UTC) }

// RegistryIn is Registry with the weekly digest's tick labelled with the
// ISO week of its scheduled time in digestZone (digest.FanoutIn): the
// registry of the e-mail function, given PARTNER_DIGEST_TIMEZONE. Only a
// tick's args differ; every type, arg and key is the same in every zone.
func RegistryIn(digestZone *time.Location) *contract.Registry {
	r, err := contract.NewRegistry(typesIn(digestZone)...)
	if err != nil {
		panic(err)
	}
	return r
}
