package enginetest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// effects counts a fake effect per job.
type effects struct {
	mu sync.Mutex
	n  map[string]int
	// times is how often one call performs the effect (a broken handler
	// performs it twice).
	times int
}

func (e *effects) Handle(_ context.Context, job engine.Job) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[job.Envelope.MessageID] += e.times
	return nil
}

func (e *effects) count(id string) int { e.mu.Lock(); defer e.mu.Unlock(); return e.n[id] }

func jobType(bias engine.Bias, lease bool) engine.JobType {
	return engine.JobType{
		Name: "test.effect.v1", Args: []engine.ArgSpec{{Name: "userId", Format: engine.FormatID, Required: true}},
		Queue: "default", EnabledByDefault: true, Bias: bias, Lease: lease, KeyPrefix: "effect", KeyArgs: []string{"userId"},
	}
}

// A well-behaved handler converges under every scenario, with either bias.
func TestRunTwicePassesAConvergingJob(t *testing.T) {
	for _, bias := range []engine.Bias{engine.EffectThenClaim, engine.ClaimThenEffect} {
		t.Run(bias.String(), func(t *testing.T) {
			e := &effects{n: map[string]int{}, times: 1}
			enginetest.RunTwice(t, enginetest.Case{Type: jobType(bias, true), Handler: e, Effects: e.count})
		})
	}
}

// The kit can fail: it names the scenarios where the effect happened too
// often (a handler that performs its effect twice per call; a type without
// a lease under concurrent delivery).
func TestCheckNamesTheFailingCase(t *testing.T) {
	e := &effects{n: map[string]int{}, times: 2}
	err := enginetest.Check(enginetest.Case{Type: jobType(engine.EffectThenClaim, true), Handler: e, Effects: e.count})
	if err == nil || !strings.Contains(err.Error(), "twice in sequence: the effect happened 2 times; want exactly 1") {
		t.Fatalf("Check = %v; want the sequence case named", err)
	}
}

// keyed is a handler whose effect is idempotent on its own: the provider
// dedups by the job id, so a repeat of the call is no second effect.
type keyed struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (k *keyed) Handle(_ context.Context, job engine.Job) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen[job.Envelope.MessageID] = true
	return nil
}

func (k *keyed) count(id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen[id] {
		return 1
	}
	return 0
}

// Strict mode fails a bare counter (its effect repeats after a crash
// between effect and claim, which the default mode allows) and passes a
// handler keyed by the job id.
func TestExactlyOnceFailsACounterAndPassesAKeyedHandler(t *testing.T) {
	counter := &effects{n: map[string]int{}, times: 1}
	lenient := enginetest.Case{Type: jobType(engine.EffectThenClaim, true), Handler: counter, Effects: counter.count}
	if err := enginetest.Check(lenient); err != nil {
		t.Fatalf("the default mode refused a counter: %v", err)
	}
	strict := lenient
	strict.ExactlyOnce = true
	err := enginetest.Check(strict)
	if err == nil || !strings.Contains(err.Error(), "crash after effect, before claim, then redelivery: the effect happened 2 times; want exactly 1") {
		t.Fatalf("strict Check of a counter = %v; want the crash between effect and claim named", err)
	}
	k := &keyed{seen: map[string]bool{}}
	enginetest.RunTwice(t, enginetest.Case{Type: jobType(engine.EffectThenClaim, true), Handler: k, Effects: k.count, ExactlyOnce: true})
}
