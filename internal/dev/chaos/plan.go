package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// Caller is the caller every request of a campaign names (X-Caller).
const Caller = "chaos"

// user is a user the campaign seeds, with the address confirmation its job
// type needs to send a mail (a verification goes to an unconfirmed address,
// a digest to a confirmed one).
type user struct {
	ID        string
	Confirmed bool
	// Poisoned: its stored address is not a plain address, so every job
	// for it fails for good (dead-lettered with its reason, reading
	// Failed, even after a redrive).
	Poisoned bool
}

// key is the job's natural key: Key, or else its Idempotency-Key.
func (j plannedJob) key() string { return cmp.Or(j.Key, j.IdemKey) }

// Email is the address stored for the user.
func (u user) Email() string {
	if u.Poisoned {
		return "Poisoned <" + u.ID + "@example.com>"
	}
	return u.ID + "@example.com"
}

// kind is one of the four job types with how its jobs are built.
type kind struct {
	Type      string
	Queue     engine.Queue
	Confirmed bool
	args      func(userID string, i int) map[string]string
}

// kinds are the shipped job types, each with a real effect (a mail).
var kinds = []kind{
	{client.TypePartnerVerification, contract.QueueCritical, false, func(u string, _ int) map[string]string {
		return map[string]string{"userId": u, "roleCode": "city-partner", "countryCode": "BD"}
	}},
	{client.TypePasswordReset, contract.QueueCritical, true, func(u string, _ int) map[string]string {
		return map[string]string{"userId": u, "countryCode": "BD"}
	}},
	{client.TypeWelcome, contract.QueueDefault, true, func(u string, _ int) map[string]string {
		return map[string]string{"userId": u}
	}},
	{client.TypePartnerDigest, contract.QueueBulk, true, func(u string, i int) map[string]string {
		return map[string]string{"userId": u, "digestId": fmt.Sprintf("2026-W%02d", 1+i%52)}
	}},
}

// usersOf returns the n users the campaign seeds for kind k, and the
// poisoned one.
func usersOf(k kind, n int) ([]user, user) {
	out := make([]user, n)
	for i := range out {
		out[i] = user{ID: fmt.Sprintf("u-chaos-%s-%d", shortName(k.Type), i+1), Confirmed: k.Confirmed}
	}
	return out, user{ID: fmt.Sprintf("u-chaos-%s-poisoned", shortName(k.Type)), Confirmed: k.Confirmed, Poisoned: true}
}

// shortName is a type's short name for user ids: verification, reset, …
func shortName(jobType string) string {
	switch jobType {
	case client.TypePartnerVerification:
		return "verify"
	case client.TypePasswordReset:
		return "reset"
	case client.TypeWelcome:
		return "welcome"
	}
	return "digest"
}

// frontFault is what the campaign's own front does to a request's first
// attempt: nothing, a 503 before the API sees it, or a 502 after the API
// answered (the response lost on its way to the client).
type frontFault int

const (
	frontNone frontFault = iota
	frontBefore
	frontAfter
)

// plannedJob is one logical enqueue of the campaign.
type plannedJob struct {
	Index int
	Kind  kind
	User  string
	Args  map[string]string
	// IdemKey is the request's Idempotency-Key and the job's key; the job
	// id is derived from it.
	IdemKey string
	JobID   string
	Delay   int // seconds
	// Key is the job's natural key when it is not IdemKey (the clock
	// campaign's items that share one); RunAt its run time, if any.
	Key   string
	RunAt time.Time
	// Twins is how many more identical requests go out at the same time
	// (same Idempotency-Key).
	Twins int
	// Copies is how many copies of the job's message the campaign sends
	// straight to its queue, together, right after it is accepted.
	Copies int
	// Cancel: DELETE the job right after it is accepted.
	Cancel bool
	Front  frontFault
	// Poisoned: the job's user is poisoned (it can never succeed).
	Poisoned bool
	// Source is how the job gets in: over HTTP (the plan's default),
	// through the outbox, or enqueued by the digest fan-out.
	Source source
	// Rewrite: the job's outbox item is written again by a second
	// transaction once the first committed (a MODIFY on the stream, the
	// same job). Refuse: its transaction signs up a user who exists
	// already, so it fails its condition on purpose and makes no job.
	Rewrite, Refuse bool
}

// source is how a job gets into the system.
type source int

const (
	// viaHTTP: POST /v1/jobs/{type}, as caller Caller.
	viaHTTP source = iota
	// viaOutbox: an outbox item in the campaign's own transaction, relayed
	// for caller outbox:<Producer>.
	viaOutbox
	// viaFanout: a partner's digest, enqueued by the weekly fan-out.
	viaFanout
)

// Mix is how often a campaign's jobs get each treatment (each a fraction).
// Outbox is the share of the jobs enqueued through the outbox instead of
// HTTP; of those, Rewrite are written twice and Refuse fail their
// transaction's condition on purpose.
type Mix struct {
	Delayed, Twins, Copies, Cancel, FrontBefore, FrontAfter, Poisoned float64
	Outbox, Rewrite, Refuse                                           float64
}

// DefaultMix is the mix of make chaos.
var DefaultMix = Mix{Delayed: 0.10, Twins: 0.05, Copies: 0.15, Cancel: 0.03, FrontBefore: 0.03, FrontAfter: 0.03, Poisoned: 0.01,
	Outbox: 0.15, Rewrite: 0.25, Refuse: 0.10}

// Producer is the producer the campaign writes its outbox items as: its
// jobs belong to caller outbox:chaos.
const Producer = "chaos"

// plan draws n jobs across the four types from seed; runID makes their keys
// unique to the run.
func plan(n int, usersPerType int, mix Mix, seed uint64, runID string) []plannedJob {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	// The outbox's share is drawn apart, so that the rest of the plan is
	// the one a seed always drew.
	orng := rand.New(rand.NewPCG(seed+2, seed+3))
	users, poisoned := make([][]user, len(kinds)), make([]user, len(kinds))
	for i, k := range kinds {
		users[i], poisoned[i] = usersOf(k, usersPerType)
	}
	out := make([]plannedJob, n)
	for i := range out {
		ki := i % len(kinds)
		k := kinds[ki]
		u := users[ki][rng.IntN(len(users[ki]))]
		if every(i, mix.Poisoned) {
			u = poisoned[ki]
		}
		key := fmt.Sprintf("chaos-%s-%d", runID, i)
		j := plannedJob{Index: i, Kind: k, User: u.ID, Args: k.args(u.ID, i), IdemKey: key, JobID: engine.DeriveMessageID(Caller, key),
			Poisoned: u.Poisoned}
		if rng.Float64() < mix.Delayed {
			j.Delay = 2 + rng.IntN(7)
		}
		if rng.Float64() < mix.Twins {
			j.Twins = 1 + rng.IntN(2)
		}
		if rng.Float64() < mix.Copies {
			j.Copies = 1 + rng.IntN(2)
		}
		// Cancels go mostly to delayed jobs, which have surely not run.
		if rng.Float64() < mix.Cancel*(1+9*b2f(j.Delay > 0)) {
			j.Cancel = true
		}
		switch r := rng.Float64(); {
		case r < mix.FrontBefore:
			j.Front = frontBefore
		case r < mix.FrontBefore+mix.FrontAfter:
			j.Front = frontAfter
		}
		if orng.Float64() < mix.Outbox {
			// No HTTP request: no twins, front faults or cancel (the
			// producer's job is not the campaign's caller's to cancel).
			j.Source, j.Twins, j.Front, j.Cancel = viaOutbox, 0, frontNone, false
			j.JobID = engine.DeriveMessageID(contract.OutboxCallerPrefix+Producer, key)
			j.Rewrite = orng.Float64() < mix.Rewrite
			j.Refuse = orng.Float64() < mix.Refuse
		}
		out[i] = j
	}
	return out
}

// every reports whether job i is one of a fraction p of the jobs, spread
// evenly (a rare treatment still happens in a short run).
func every(i int, p float64) bool {
	if p <= 0 {
		return false
	}
	n := max(int(1/p+0.5), 1)
	return i%n == n/2
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
