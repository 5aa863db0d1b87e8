package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/obs"
)

// TestBuildNamesEveryMissingVariable: a misconfigured function refuses to
// start and names every missing variable at once.
func TestBuildNamesEveryMissingVariable(t *testing.T) {
	for _, name := range []string{"STAGE", "MARKERS_TABLE", "USERS_TABLE", "JOBS_TABLE", "DLQ_URL", "MAIL_FROM", "APP_BASE_URL", "SMTP_ADDR"} {
		t.Setenv(name, "")
	}
	for _, q := range Consumes {
		t.Setenv(envvar.QueueURLEnv(q), "")
	}
	t.Setenv("PARK_DELAY", "soon")
	t.Setenv("SES_MAX_SEND_RATE", "fast")
	t.Setenv("BACKOFF_BASE", "soon")
	_, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err == nil {
		t.Fatal("built without configuration")
	}
	for _, want := range []string{"STAGE", "MARKERS_TABLE", "USERS_TABLE", "JOBS_TABLE", envvar.QueueURLEnv(Consumes[len(Consumes)-1]), "DLQ_URL", "MAIL_FROM", "APP_BASE_URL", "PARK_DELAY", "SES_MAX_SEND_RATE", "BACKOFF_BASE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start).
func TestBuildWiresEverything(t *testing.T) {
	for name, v := range map[string]string{
		"STAGE": "local", "MARKERS_TABLE": "m", "USERS_TABLE": "u", "JOBS_TABLE": "j", "DLQ_URL": "http://q/dlq",
		"MAIL_FROM": "noreply@example.com", "APP_BASE_URL": "http://127.0.0.1:3000", "SMTP_ADDR": "127.0.0.1:1025",
		"TOGGLE_TTL": "5s", "PARK_DELAY": "2", "MAX_RECEIVE_COUNT": "5", "AWS_REGION": "us-east-1",
		"SES_MAX_SEND_RATE": "14", "SES_CONFIGURATION_SET": "tracking", "SCHEDULE_GROUP": "runstwice-test-jobs", "BACKOFF_BASE": "2s", "BACKOFF_FACTOR": "3", "BACKOFF_CAP": "1m",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	} {
		t.Setenv(name, v)
	}
	for _, q := range Consumes {
		t.Setenv(envvar.QueueURLEnv(q), "http://q/"+string(q))
	}
	r, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err != nil {
		t.Fatal(err)
	}
	// The function consumes the queues its event sources name, and has a
	// handler for exactly the registered types sent to them: a type on one
	// of its queues without a handler could never run.
	tmpl, err := stack.Load("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tmpl.WorkerProblems("functions/email", Consumes, contract.Types(), r.Handles) {
		t.Error(p)
	}
}
