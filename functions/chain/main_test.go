package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestBuildNamesEveryMissingVariable: a misconfigured function refuses to
// start and names every missing variable at once.
func TestBuildNamesEveryMissingVariable(t *testing.T) {
	want := []string{"STAGE", "MARKERS_TABLE", "JOBS_TABLE", "DLQ_URL", "IDEMPOTENCY_TABLE"}
	for _, q := range contract.Queues {
		want = append(want, envvar.QueueURLEnv(q))
	}
	for _, name := range want {
		t.Setenv(name, "")
	}
	_, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err == nil {
		t.Fatal("built without configuration")
	}
	for _, name := range want {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start): it consumes the queues its event sources
// name and handles exactly the registered types sent to them, and it reads
// the markers table's stream.
func TestBuildWiresEverything(t *testing.T) {
	vars := testkit.With(map[string]string{
		"STAGE": "dev", "JOBS_TABLE": "jobs", "MARKERS_TABLE": "markers", "IDEMPOTENCY_TABLE": "idem",
		"SCHEDULE_GROUP": "runstwice-dev-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
		"DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:dlq", "DLQ_URL": "http://q/dlq",
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	}, testkit.WorkQueueEnv("http://127.0.0.1:1", "arn:aws:sqs:us-east-1:123456789012"))
	for k, v := range vars {
		t.Setenv(k, v)
	}
	f, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := stack.Load("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := f.Runner.(*engine.Runner)
	for _, p := range tmpl.WorkerProblems("functions/chain", Consumes, contract.Types(), r.Handles) {
		t.Error(p)
	}
	if f.Stream == nil || f.Stream.Releaser == nil || f.Stream.Send == nil {
		t.Fatalf("the function does not read the markers stream: %+v", f.Stream)
	}
}
