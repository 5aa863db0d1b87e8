package main

import (
	"context"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/examples/internal/exampletest"
)

// TestBuildRefusesAMissingVariable: the function does not start without
// one of the variables it needs, and says which; with all of them it is
// wired (untraced: no OTLP endpoint).
func TestBuildRefusesAMissingVariable(t *testing.T) {
	exampletest.CheckBuildRefusesAMissingVariable(t, environment, func(ctx context.Context) (*engine.Handler[Event], error) {
		return build(ctx, nil)
	})
}
