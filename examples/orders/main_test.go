package main

import (
	"testing"

	"github.com/runstwice/runstwice/examples/internal/exampletest"
)

// TestBuildRefusesAMissingVariable: the function does not start without
// one of the variables it needs, and says which; with all of them it is
// wired.
func TestBuildRefusesAMissingVariable(t *testing.T) {
	exampletest.CheckBuildRefusesAMissingVariable(t, environment, build)
}
