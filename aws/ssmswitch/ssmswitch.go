// Package ssmswitch is the engine.Switch on SSM Parameter Store: one
// parameter per job type, <path>/<job type>, whose value "true"/"on" or
// "false"/"off" turns the type on or off (an expiry and a reason may
// follow; see the bundle's operations guide).
//
// The parameters under path are read in one GetParametersByPath call and
// cached for the Source's TTL. A read that fails (denied, throttled,
// unreachable, or out of time under the caller's context) keeps the values
// of the last read that succeeded, for another TTL before it asks again; a
// source that has never read (a cold start during an outage) answers each
// type's EnabledByDefault, so a type that is off by default never runs on
// a guess. A kept value with an expiry still reverts to the default once
// it has passed, and a missing or unreadable value is the default. Read
// failures are logged and counted (ToggleReadFailed). The function's role
// needs ssm:GetParametersByPath on the path.
package ssmswitch

import (
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/toggle"
)

// API is the part of the SSM client (*ssm.Client) the source uses.
type API = toggle.SSMAPI

// Source reads the switches under one path and caches them. Its TTL,
// Logger, Metrics and Now may be set before use.
type Source = toggle.Source

// New returns the source of the switches under path. known reports whether
// a type name is one the function knows (Registry.Lookup); a parameter that
// names anything else is logged as a likely typo.
func New(client API, path string, known func(jobType string) bool) *Source {
	return toggle.NewSource(client, path, known)
}

var _ engine.Switch = (*Source)(nil)

// DefaultTTL is how long the values read from SSM are trusted.
const DefaultTTL = toggle.DefaultTTL

// Path is the bundle's parameter path of a stage's switches
// (/runstwice/<stage>/toggles); a function of its own may use any path.
func Path(stage string) string { return toggle.Path(stage) }
