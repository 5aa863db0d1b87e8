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
