package runner_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// TestAtStepSeesEveryBoundary: the AtStep hook is called at each step
// boundary, in the order a job meets them, for each bias: this is where a
// chaos build kills the process, so a boundary the hook misses is a crash
// the campaign never tries.
func TestAtStepSeesEveryBoundary(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  message.Envelope
		want []engine.Step
	}{
		{"effect then claim, with a lease", notifyJob(), []engine.Step{engine.StepAfterDecode, engine.StepAfterLease,
			engine.StepAfterEffect, engine.StepAfterClaim, engine.StepBeforeResponse}},
		{"claim then effect", testkit.EnvelopeFor(payout), []engine.Step{engine.StepAfterDecode,
			engine.StepAfterClaim, engine.StepAfterEffect, engine.StepBeforeResponse}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []engine.Step
			)
			h, _ := newHarness(t, func(c *runner.Config) {
				c.AtStep = func(s engine.Step) { mu.Lock(); got = append(got, s); mu.Unlock() }
			})
			if retried := h.Run(t, testkit.Record(t, tc.env, 1)); len(retried) != 0 {
				t.Fatalf("retried %v", retried)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("steps %v; want %v", got, tc.want)
			}
		})
	}
}
