package main

import (
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestBuildNamesEveryMissingVariable: a misconfigured function refuses to
// start and names every missing variable at once, the queue URLs (its
// redrive targets) included.
func TestBuildNamesEveryMissingVariable(t *testing.T) {
	missing := append([]string{"STAGE", "DEAD_LETTERS_TABLE", "JOBS_TABLE", "MARKERS_TABLE"}, testkit.QueueURLVars(contract.Queues)...)
	testkit.Refuses(t, build, testkit.Blank(missing...), missing...)
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start).
func TestBuildWiresEverything(t *testing.T) {
	c := testkit.MustBuild(t, build, map[string]string{
		"STAGE": "local", "DEAD_LETTERS_TABLE": "d", "JOBS_TABLE": "j", "MARKERS_TABLE": "m",
	}, testkit.WorkQueueEnv("http://q", ""), testkit.AWSEnv())
	if c == nil {
		t.Fatal("build returned no consumer")
	}
}
