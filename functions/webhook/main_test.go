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
	want := []string{"STAGE", "MARKERS_TABLE", "JOBS_TABLE", "DLQ_URL", "WEBHOOK_URL"}
	for _, q := range Consumes {
		want = append(want, envvar.QueueURLEnv(q))
	}
	for _, name := range want {
		t.Setenv(name, "")
	}
	t.Setenv("PARK_DELAY", "soon")
	t.Setenv("BACKOFF_BASE", "soon")
	_, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err == nil {
		t.Fatal("built without configuration")
	}
	for _, name := range append(want, "PARK_DELAY", "BACKOFF_BASE") {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

// TestBuildRefusesAURLThatIsNotOne: WEBHOOK_URL must be an absolute http(s)
// URL, or the function does not start.
func TestBuildRefusesAURLThatIsNotOne(t *testing.T) {
	setComplete(t)
	t.Setenv("WEBHOOK_URL", "receiver.example.com/events")
	if _, err := build(context.Background(), obs.NewLogger(io.Discard, "error")); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("built with a relative WEBHOOK_URL: %v", err)
	}
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start): it consumes the queues its event sources
// name and handles exactly the registered types sent to them.
func TestBuildWiresEverything(t *testing.T) {
	setComplete(t)
	r, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := stack.Load("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tmpl.WorkerProblems("functions/webhook", Consumes, contract.Types(), r.Handles) {
		t.Error(p)
	}
}

// setComplete sets every variable the function reads.
func setComplete(t *testing.T) {
	t.Helper()
	for name, v := range map[string]string{
		"STAGE": "local", "MARKERS_TABLE": "m", "JOBS_TABLE": "j", "DLQ_URL": "http://q/dlq",
		"WEBHOOK_URL": "http://127.0.0.1:1/events", "TOGGLE_TTL": "5s", "PARK_DELAY": "2", "MAX_RECEIVE_COUNT": "5",
		"BACKOFF_BASE": "2s", "BACKOFF_FACTOR": "3", "BACKOFF_CAP": "1m",
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	} {
		t.Setenv(name, v)
	}
	for _, q := range Consumes {
		t.Setenv(envvar.QueueURLEnv(q), "http://q/"+string(q))
	}
}
