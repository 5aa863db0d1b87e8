package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/message"
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
	Queue     message.Queue
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
	// After is 1 + the index of the planned job this one is a
	// continuation of (0: it waits for none); AfterPolicy is its policy.
	After       int
	AfterPolicy client.AfterPolicy
	// Lead is 1 + the index of the first job of the batch this job is
	// sent in (POST /v1/batches; 0: none); BatchAt is its index in the
	// batch, BatchKey the batch's Idempotency-Key. The batch's first job
	// sends it; a continuation of an earlier job of its batch names it
	// "#k".
	Lead, BatchAt int
	BatchKey      string
}

// continuation reports whether the job waits for another, parent which.
func (j plannedJob) continuation() bool { return j.After > 0 }
func (j plannedJob) parent() int        { return j.After - 1 }

// batched reports whether the job is sent in a batch, leads whether it is
// the batch's first job (which sends it).
func (j plannedJob) batched() bool { return j.Lead > 0 }
func (j plannedJob) leads() bool   { return j.Lead == j.Index+1 }

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
// After is the share of the HTTP jobs that are continuations of an
// earlier one, and Batched the share sent in batches of 2 to 6.
type Mix struct {
	Delayed, Twins, Copies, Cancel, FrontBefore, FrontAfter, Poisoned float64
	Outbox, Rewrite, Refuse                                           float64
	After, Batched                                                    float64
}

// DefaultMix is the mix of make chaos.
var DefaultMix = Mix{Delayed: 0.10, Twins: 0.05, Copies: 0.15, Cancel: 0.03, FrontBefore: 0.03, FrontAfter: 0.03, Poisoned: 0.01,
	Outbox: 0.15, Rewrite: 0.25, Refuse: 0.10, After: 0.10, Batched: 0.10}

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
		j := plannedJob{Index: i, Kind: k, User: u.ID, Args: k.args(u.ID, i), IdemKey: key, JobID: message.DeriveMessageID(Caller, key),
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
			j.JobID = message.DeriveMessageID(contract.OutboxCallerPrefix+Producer, key)
			j.Rewrite = orng.Float64() < mix.Rewrite
			j.Refuse = orng.Float64() < mix.Refuse
		}
		out[i] = j
	}
	// Drawn apart too, so the plan above stays the one a seed drew.
	chain(out, mix, rand.New(rand.NewPCG(seed+4, seed+5)), runID)
	return out
}

// chain makes a share of the plan's HTTP jobs continuations of earlier
// ones and sends a share in batches. Every other continuation waits for a
// parent that will not succeed (cancelled or poisoned) when there is one,
// most of those OnSucceeded: the ledger then sees the policy cancel them,
// or keep them waiting. A continuation is not delayed and gets no copies
// (no copy of a message can precede its first send).
func chain(out []plannedJob, mix Mix, rng *rand.Rand, runID string) {
	for i := range out {
		j := &out[i]
		if j.Source != viaHTTP || i == 0 || rng.Float64() >= mix.After {
			continue
		}
		var parents, failing []int
		for p := max(0, i-40); p < i; p++ {
			if out[p].Source == viaHTTP {
				parents = append(parents, p)
				if out[p].Cancel || out[p].Poisoned {
					failing = append(failing, p)
				}
			}
		}
		if len(parents) == 0 {
			continue
		}
		j.After, j.AfterPolicy = 1+parents[rng.IntN(len(parents))], client.OnSucceeded
		if len(failing) > 0 && rng.IntN(2) == 0 {
			j.After = 1 + failing[rng.IntN(len(failing))]
		}
		if rng.IntN(4) == 0 {
			j.AfterPolicy = client.OnAnyEnd
		}
		j.Delay, j.Copies = 0, 0
	}
	for i := 0; i < len(out); i++ {
		if out[i].Source != viaHTTP || out[i].Twins > 0 || out[i].batched() || rng.Float64() >= mix.Batched/3.5 {
			continue
		}
		key, size := fmt.Sprintf("chaos-%s-batch-%d", runID, i), 2+rng.IntN(5)
		members := []int{i}
		for k := i + 1; k < len(out) && len(members) < size; k++ {
			p := out[k].parent()
			// No twins (the batch is the request), and a parent outside
			// the batch must come before it (its answer names the job id).
			if out[k].Source != viaHTTP || out[k].Twins > 0 || (out[k].continuation() && p >= i && !slices.Contains(members, p)) {
				continue
			}
			members = append(members, k)
		}
		for n, k := range members {
			out[k].Lead, out[k].BatchAt, out[k].BatchKey, out[k].Front = i+1, n, key, frontNone
			out[k].JobID = enqueue.BatchJobID(Caller, key, n)
		}
		out[i].Front = []frontFault{frontNone, frontBefore, frontAfter}[rng.IntN(3)]
		i = members[len(members)-1]
	}
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
