package main

import (
	"testing"

	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestBuildNamesEveryMissingVariable: a misconfigured function refuses to
// start and names every missing or malformed variable at once.
func TestBuildNamesEveryMissingVariable(t *testing.T) {
	missing := append([]string{"STAGE", "MARKERS_TABLE", "USERS_TABLE", "JOBS_TABLE", "DLQ_URL", "MAIL_FROM", "APP_BASE_URL"}, testkit.QueueURLVars(Consumes)...)
	env := testkit.With(testkit.Blank(append(missing, "SMTP_ADDR")...),
		map[string]string{"PARK_DELAY": "soon", "SES_MAX_SEND_RATE": "fast", "BACKOFF_BASE": "soon"})
	testkit.Refuses(t, build, env, append(missing, "PARK_DELAY", "SES_MAX_SEND_RATE", "BACKOFF_BASE")...)
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start): it consumes the queues its event sources
// name and has a handler for exactly the registered types sent to them (a
// type on one of its queues without a handler could never run).
func TestBuildWiresEverything(t *testing.T) {
	r := testkit.MustBuild(t, build, map[string]string{
		"STAGE": "local", "MARKERS_TABLE": "m", "USERS_TABLE": "u", "JOBS_TABLE": "j", "DLQ_URL": "http://q/dlq",
		"MAIL_FROM": "noreply@example.com", "APP_BASE_URL": "http://127.0.0.1:3000", "SMTP_ADDR": "127.0.0.1:1025",
		"TOGGLE_TTL": "5s", "PARK_DELAY": "2", "MAX_RECEIVE_COUNT": "5",
		"SES_MAX_SEND_RATE": "14", "SES_CONFIGURATION_SET": "tracking", "SCHEDULE_GROUP": "runstwice-test-jobs", "BACKOFF_BASE": "2s", "BACKOFF_FACTOR": "3", "BACKOFF_CAP": "1m",
	}, testkit.WorkQueueEnv("http://q", ""), testkit.AWSEnv())
	stack.CheckWorker(t, "functions/email", Consumes, r.Handles)
}
