package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/testkit"
)

// The runner's own fixture types: a mail-like type with a lease, a
// fail-closed one, and a money-like one that must never run twice.
var (
	notify = contract.JobType{
		Name: "test.notify.v1", Args: []contract.ArgSpec{{Name: "userId", Format: contract.FormatID, Required: true}},
		Queue: contract.QueueDefault, EnabledByDefault: true, Lease: true, KeyPrefix: "notify", KeyArgs: []string{"userId"},
	}
	digest = contract.JobType{
		Name: "test.digest.v1", Args: []contract.ArgSpec{{Name: "userId", Format: contract.FormatID, Required: true}},
		Queue: contract.QueueBulk, EnabledByDefault: false, Lease: true, KeyPrefix: "digest", KeyArgs: []string{"userId"},
	}
	// weekly is a tick type: a recurring schedule sends it, and it skips
	// while its (fail-closed) switch is off.
	weekly = contract.JobType{
		Name: "test.weekly.v1", Args: []contract.ArgSpec{{Name: "digestId", Format: contract.FormatISOWeek, Required: true}},
		Queue: contract.QueueBulk, Lease: true, KeyPrefix: "weekly", KeyArgs: []string{"digestId"}, WhileOff: contract.Skip,
		TickArgs: func(at time.Time) map[string]string { return map[string]string{"digestId": contract.ISOWeek(at)} },
	}
	payout = contract.JobType{
		Name: "test.payout.v1", Args: []contract.ArgSpec{{Name: "payoutId", Format: contract.FormatID, Required: true}},
		Queue: contract.QueueCritical, EnabledByDefault: true, Bias: contract.ClaimThenEffect, KeyPrefix: "payout", KeyArgs: []string{"payoutId"},
	}
)

// registry returns the fixture types, with leases on or off.
func registry(t testing.TB, lease bool) *contract.Registry {
	t.Helper()
	types := []contract.JobType{notify, digest, payout, weekly}
	for i := range types[:2] {
		types[i].Lease = lease
	}
	reg, err := contract.NewRegistry(types...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// effects plays a job's work: it records "load" and "send" on the trace and
// counts sends per job; err fails it.
type effects struct {
	h   *testkit.Harness
	mu  sync.Mutex
	err error
	n   map[string]int
}

func (e *effects) Handle(_ context.Context, job engine.Job) error {
	e.h.Trace.Add("load")
	e.mu.Lock()
	err := e.err
	e.mu.Unlock()
	if err != nil {
		return err
	}
	e.h.Trace.Add("send")
	e.mu.Lock()
	e.n[job.Envelope.MessageID]++
	e.mu.Unlock()
	return nil
}

func (e *effects) fail(err error) { e.mu.Lock(); e.err = err; e.mu.Unlock() }

func (e *effects) sends(jobID string) int { e.mu.Lock(); defer e.mu.Unlock(); return e.n[jobID] }

// newHarness is the runner on the kit's fakes with effects as the handler
// of every fixture type.
func newHarness(t testing.TB, mutate func(*engine.Config)) (*testkit.Harness, *effects) {
	t.Helper()
	e := &effects{n: map[string]int{}}
	reg := registry(t, true)
	handlers := map[string]engine.Handler{}
	for _, n := range reg.Names() {
		handlers[n] = e
	}
	h := testkit.NewHarness(t, reg, handlers, mutate)
	e.h = h
	return h, e
}

func notifyJob() contract.Envelope { return testkit.EnvelopeFor(notify) }
