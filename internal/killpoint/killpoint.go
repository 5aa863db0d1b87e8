// Package killpoint lets the chaos campaign (make chaos) kill a function
// process abruptly at a named step of a job's life, the way a crashed or
// timed-out Lambda execution environment dies, and break the runner on
// purpose (the mutations) to show that the campaign catches it. The engine
// knows nothing of either: Wire hooks the kill points into a runner's
// Config (Config.AtStep) and wraps its marker store and kill switch in
// decorators that make the mutations. Release builds carry none of it: Wire
// is a no-op unless the binary is built with the build tag `chaos`
// (killpoint_chaos.go), and a test proves the release bootstrap contains
// neither hook's environment variable.
package killpoint

import "github.com/runstwice/runstwice/engine"

// The step boundaries a process can be killed at.
const (
	AfterDecode    = string(engine.StepAfterDecode)
	AfterLease     = string(engine.StepAfterLease)
	AfterEffect    = string(engine.StepAfterEffect)
	AfterClaim     = string(engine.StepAfterClaim)
	BeforeResponse = string(engine.StepBeforeResponse)
	// MidBatch is a batch's accept cut short (internal/enqueue): after
	// its item is written, after its jobs are reserved, after they are
	// sent, before its answer is stored. The API's process and the batch
	// finisher's die there.
	MidBatch = "mid-batch"
)

// Steps lists the step boundaries, in the order a job meets them, and
// the batch's.
var Steps = []string{AfterDecode, AfterLease, AfterEffect, AfterClaim, BeforeResponse, MidBatch}

// EnvVar names the variable a chaos build reads: comma-separated
// step=probability pairs, e.g. "after-effect=0.02,after-lease=0.01".
const EnvVar = "RUNSTWICE_KILL" + "_AT"

// The mutations a chaos build can be told to make (MutateEnvVar): each
// removes one guarantee of the runner, so a campaign run with it must fail.
const (
	// NoClaim: the marker is never claimed after the effect.
	NoClaim = "no-claim"
	// NoPeek: the runner does not heed that a job already ran (neither the
	// batch peek's marker nor a lease refused because the job is done).
	NoPeek = "no-peek"
	// IgnoreSwitch: kill switches are ignored (a disabled job runs).
	IgnoreSwitch = "ignore-switch"
	// NoLease: no lease is taken before the effect, so concurrent twins
	// both run it.
	NoLease = "no-lease"
	// ShortGuards: every guard lives its own floor from when it is written
	// (a marker or tombstone 30 days), whatever the job's runAt: the
	// lifetimes of the request path, before internal/lifetime.
	ShortGuards = "short-guards"
	// NoSweep: the schedule sweep deletes nothing (its job succeeds), so a
	// schedule whose delete failed outlives its job.
	NoSweep = "no-sweep"
	// SkipPages: a fan-out page that finds its switch off is skipped (it
	// succeeds without work) instead of parked, as a tick is.
	SkipPages = "skip-pages"
	// RelayForgets: the outbox relay stores no decision it can find again,
	// so an item relayed again after the job it deduplicated onto ended
	// becomes a new job.
	RelayForgets = "relay-forgets"
	// ContinuationUnguarded: a parent's end sends each of its waiting
	// continuations without its guard (the policy's verdict and the
	// conditional write that moves it out of AwaitingContinuation), so a
	// continuation its parent's end refuses runs.
	ContinuationUnguarded = "continuation-unguarded"
)

// Mutations lists the mutations.
var Mutations = []string{NoClaim, NoPeek, IgnoreSwitch, NoLease, ShortGuards, NoSweep, SkipPages, RelayForgets, ContinuationUnguarded}

// ClockMutations are the mutations that remove a fix of the promise across
// time (docs/chaos.md, "The clock"): the clock scenarios break them.
var ClockMutations = []string{ShortGuards, NoSweep, SkipPages, RelayForgets}

// MutateEnvVar names the variable a chaos build reads its mutations from:
// comma-separated names, e.g. "no-claim".
const MutateEnvVar = "RUNSTWICE_MUT" + "ATE"
