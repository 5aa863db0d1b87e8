package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// The runner's own fixture types: a mail-like type with a lease, a
// fail-closed one, and a money-like one that must never run twice.
var (
	notify = message.JobType{
		Name: "test.notify.v1", Args: []message.ArgSpec{{Name: "userId", Format: message.FormatID, Required: true}},
		Queue: "default", EnabledByDefault: true, Lease: true, KeyPrefix: "notify", KeyArgs: []string{"userId"},
	}
	digest = message.JobType{
		Name: "test.digest.v1", Args: []message.ArgSpec{{Name: "userId", Format: message.FormatID, Required: true}},
		Queue: "bulk", EnabledByDefault: false, Lease: true, KeyPrefix: "digest", KeyArgs: []string{"userId"},
	}
	// weekly is a tick type: a recurring schedule sends it, and it skips
	// while its (fail-closed) switch is off.
	weekly = message.JobType{
		Name: "test.weekly.v1", Args: []message.ArgSpec{{Name: "digestId", Format: formatWeek, Required: true}},
		Queue: "bulk", Lease: true, KeyPrefix: "weekly", KeyArgs: []string{"digestId"}, WhileOff: engine.Skip,
		TickArgs: func(at time.Time) map[string]string { return map[string]string{"digestId": isoWeek(at)} },
	}
	payout = message.JobType{
		Name: "test.payout.v1", Args: []message.ArgSpec{{Name: "payoutId", Format: message.FormatID, Required: true}},
		Queue: "critical", EnabledByDefault: true, Bias: engine.ClaimThenEffect, KeyPrefix: "payout", KeyArgs: []string{"payoutId"},
	}
)

// registry returns the fixture types, with leases on or off.
func registry(t testing.TB, lease bool) *message.Registry {
	t.Helper()
	types := []message.JobType{notify, digest, payout, weekly}
	for i := range types[:2] {
		types[i].Lease = lease
	}
	reg, err := message.NewRegistry(types...)
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

func (e *effects) Handle(_ context.Context, job runner.Job) error {
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
func newHarness(t testing.TB, mutate func(*runner.Config)) (*testkit.Harness, *effects) {
	t.Helper()
	e := &effects{n: map[string]int{}}
	reg := registry(t, true)
	handlers := map[string]runner.Handler{}
	for _, n := range reg.Names() {
		handlers[n] = e
	}
	h := testkit.NewHarness(t, reg, handlers, mutate)
	e.h = h
	return h, e
}

func notifyJob() message.Envelope { return testkit.EnvelopeFor(notify) }

// formatWeek is an ISO week ("2026-W48"): an application's own format,
// declared with NewFormat, for the weekly tick types of these tests.
var formatWeek = message.NewFormat("ISO week", "2026-W48", func(s string) bool {
	return len(s) == 8 && s[4:6] == "-W" && strings.Trim(s[:4]+s[6:], "0123456789") == "" && s[6:] >= "01" && s[6:] <= "53"
})

// isoWeek is t's ISO week, the digestId of a weekly tick's job.
func isoWeek(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}
