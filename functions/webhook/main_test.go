package main

import (
	"testing"

	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestBuildNamesEveryMissingVariable: a misconfigured function refuses to
// start and names every missing or malformed variable at once.
func TestBuildNamesEveryMissingVariable(t *testing.T) {
	missing := append([]string{"STAGE", "MARKERS_TABLE", "JOBS_TABLE", "DLQ_URL", "WEBHOOK_URL"}, testkit.QueueURLVars(Consumes)...)
	env := testkit.With(testkit.Blank(missing...), map[string]string{"PARK_DELAY": "soon", "BACKOFF_BASE": "soon"})
	testkit.Refuses(t, build, env, append(missing, "PARK_DELAY", "BACKOFF_BASE")...)
}

// TestBuildRefusesAURLThatIsNotOne: WEBHOOK_URL must be an absolute http(s)
// URL, or the function does not start.
func TestBuildRefusesAURLThatIsNotOne(t *testing.T) {
	testkit.Refuses(t, build, testkit.With(complete(), map[string]string{"WEBHOOK_URL": "receiver.example.com/events"}), "absolute")
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start): it consumes the queues its event sources
// name and handles exactly the registered types sent to them.
func TestBuildWiresEverything(t *testing.T) {
	r := testkit.MustBuild(t, build, complete())
	stack.CheckWorker(t, "functions/webhook", Consumes, r.Handles)
}

// complete is every variable the function reads.
func complete() map[string]string {
	return testkit.With(map[string]string{
		"STAGE": "local", "MARKERS_TABLE": "m", "JOBS_TABLE": "j", "DLQ_URL": "http://q/dlq",
		"WEBHOOK_URL": "http://127.0.0.1:1/events", "TOGGLE_TTL": "5s", "PARK_DELAY": "2", "MAX_RECEIVE_COUNT": "5",
		"BACKOFF_BASE": "2s", "BACKOFF_FACTOR": "3", "BACKOFF_CAP": "1m",
	}, testkit.With(testkit.WorkQueueEnv("http://q", ""), testkit.AWSEnv()))
}
