package main

import (
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestBuildNamesEveryMissingVariable: a misconfigured function refuses to
// start and names every missing variable at once.
func TestBuildNamesEveryMissingVariable(t *testing.T) {
	want := append([]string{"STAGE", "MARKERS_TABLE", "JOBS_TABLE", "DLQ_URL", "IDEMPOTENCY_TABLE"}, testkit.QueueURLVars(contract.Queues)...)
	testkit.Refuses(t, build, testkit.Blank(want...), want...)
}

// TestBuildWiresEverything builds the function from a complete environment
// (no AWS call is made at start): it consumes the queues its event sources
// name and handles exactly the registered types sent to them, and it reads
// the markers table's stream.
func TestBuildWiresEverything(t *testing.T) {
	f := testkit.MustBuild(t, build, map[string]string{
		"STAGE": "dev", "JOBS_TABLE": "jobs", "MARKERS_TABLE": "markers", "IDEMPOTENCY_TABLE": "idem",
		"SCHEDULE_GROUP": "runstwice-dev-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
		"DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:dlq", "DLQ_URL": "http://q/dlq",
	}, testkit.WorkQueueEnv("http://127.0.0.1:1", "arn:aws:sqs:us-east-1:123456789012"), testkit.AWSEnv())
	stack.CheckWorker(t, "functions/chain", Consumes, f.Runner.(*runner.Runner).Handles)
	if f.Stream == nil || f.Stream.Releaser == nil || f.Stream.Send == nil {
		t.Fatalf("the function does not read the markers stream: %+v", f.Stream)
	}
}
