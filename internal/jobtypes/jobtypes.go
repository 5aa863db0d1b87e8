// Package jobtypes is the list of every job type runstwice ships, gathered
// from the use cases that declare them beside their handlers. It sits with
// the wiring, above the use cases it gathers, so its imports point down:
// the functions, jobctl, the producer's client and the dev tools build
// their registry here. Adding a use case with job types means adding it to
// Types.
package jobtypes

import (
	"slices"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/sweep"
)

// Types returns the declaration of every shipped job type.
func Types() []contract.JobType {
	return slices.Concat(email.Types(), digest.Types(), sweep.Types())
}

// Registry returns a registry of every shipped job type. The declarations
// are fixed at build time and a test proves they load, so a refused
// declaration is a programming error and panics.
func Registry() *contract.Registry {
	r, err := contract.NewRegistry(Types()...)
	if err != nil {
		panic(err)
	}
	return r
}
