package testkit

import (
	"context"
	"errors"
	"sync"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
)

// Reserver plays jobs.Store's Reserve and Promote in memory with the rules
// that matter to a producer (runner.TickJobs, the fan-out's job store): a
// job id that exists is the caller's own job (Resume while Pending, else
// Duplicate); a key held by another job is a Duplicate while that job is
// active, and after it ended (Finish) the policy decides. Err makes every
// call fail; FailAfter makes the call after that many succeed fail, to play
// a crash.
type Reserver struct {
	Err error

	mu       sync.Mutex
	byID     map[string]jobs.Job
	byKey    map[string]string
	reserves int
	// crash: when > 0, the reserve or promote number crash fails.
	crash int
	calls int
}

// ErrCrash is the error of the call a Reserver's CrashAt picked.
var ErrCrash = errors.New("testkit: crash")

// CrashAt makes the n-th call from now (Reserve or Promote, counted
// together) fail with ErrCrash; 0 turns it off.
func (r *Reserver) CrashAt(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.crash, r.calls = n, 0
}

func (r *Reserver) init() {
	if r.byID == nil {
		r.byID, r.byKey = map[string]jobs.Job{}, map[string]string{}
	}
}

func (r *Reserver) step() error {
	r.init()
	if r.Err != nil {
		return r.Err
	}
	r.calls++
	if r.crash > 0 && r.calls == r.crash {
		r.crash = 0
		return ErrCrash
	}
	return nil
}

func dedupKey(j jobs.Job) string { return jobs.DedupPK(j.Caller, j.Type, j.Key) }

// Reserve implements runner.TickJobs.
func (r *Reserver) Reserve(_ context.Context, job jobs.Job, policy contract.DuplicatePolicy) (jobs.Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.step(); err != nil {
		return jobs.Decision{}, err
	}
	if own, ok := r.byID[job.ID]; ok {
		if own.State == jobs.StatePending {
			return jobs.Decision{Outcome: jobs.Resume, Job: own, Own: true}, nil
		}
		return jobs.Decision{Outcome: jobs.Duplicate, Job: own, Own: true}, nil
	}
	if prevID, ok := r.byKey[dedupKey(job)]; ok {
		prev := r.byID[prevID]
		switch {
		case prev.State.Active():
			return jobs.Decision{Outcome: jobs.Duplicate, Job: prev}, nil
		case !jobs.Allows(policy, prev.State):
			return jobs.Decision{Outcome: jobs.Rejected, Job: prev}, nil
		}
	}
	job.State = jobs.StatePending
	r.byID[job.ID] = job
	r.byKey[dedupKey(job)] = job.ID
	r.reserves++
	return jobs.Decision{Outcome: jobs.Reserved, Job: job, Own: true}, nil
}

// Promote implements runner.TickJobs: a Pending job becomes Enqueued.
func (r *Reserver) Promote(_ context.Context, job jobs.Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.step(); err != nil {
		return err
	}
	if j, ok := r.byID[job.ID]; ok && j.State == jobs.StatePending {
		j.State = jobs.StateEnqueued
		r.byID[job.ID] = j
	}
	return nil
}

// Finish gives job jobID a terminal state, as its run would.
func (r *Reserver) Finish(jobID string, s jobs.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if j, ok := r.byID[jobID]; ok {
		j.State = s
		r.byID[jobID] = j
	}
}

// Jobs returns every reserved job, by id.
func (r *Reserver) Jobs() map[string]jobs.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]jobs.Job, len(r.byID))
	for id, j := range r.byID {
		out[id] = j
	}
	return out
}

// Reserves is how many new jobs were reserved.
func (r *Reserver) Reserves() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reserves
}
