// Package killpoint lets the chaos campaign (make chaos) kill a function
// process abruptly at a named step of a job's life, the way a crashed or
// timed-out Lambda execution environment dies. Release builds carry no hook:
// At is a no-op unless the binary is built with the build tag `chaos`
// (killpoint_chaos.go), and a test proves the release bootstrap does not
// contain the hook's environment variable.
package killpoint

// The step boundaries a process can be killed at.
const (
	AfterDecode    = "after-decode"
	AfterLease     = "after-lease"
	AfterEffect    = "after-effect"
	AfterClaim     = "after-claim"
	BeforeResponse = "before-response"
)

// Steps lists the step boundaries, in the order a job meets them.
var Steps = []string{AfterDecode, AfterLease, AfterEffect, AfterClaim, BeforeResponse}

// EnvVar names the variable a chaos build reads: comma-separated
// step=probability pairs, e.g. "after-effect=0.02,after-lease=0.01".
const EnvVar = "RUNSTWICE_KILL" + "_AT"
