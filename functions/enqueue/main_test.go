package main

import (
	"testing"

	"github.com/runstwice/runstwice/internal/testkit"
)

// complete is every variable the function reads but ALLOW_FEDERATED_USERS.
func complete() map[string]string {
	return testkit.With(map[string]string{
		"STAGE": "dev", "IDEMPOTENCY_TABLE": "idem", "JOBS_TABLE": "jobs", "MARKERS_TABLE": "markers",
		"SCHEDULE_GROUP": "runstwice-dev-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
		"DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:dlq",
	}, testkit.WorkQueueEnv("http://q", "arn:aws:sqs:us-east-1:123456789012"))
}

// TestBuildNeedsEveryVariable: without any one of its variables the
// function refuses to start and names it; with all, it is wired whole.
func TestBuildNeedsEveryVariable(t *testing.T) {
	h := testkit.NeedsEach(t, build, complete(), testkit.AWSEnv())
	if h.Registry == nil || h.Idempotency == nil || h.Jobs == nil || h.Queue == nil || h.Schedules == nil {
		t.Fatalf("build: %+v", h)
	}
}

// The template's AllowFederatedUsers reaches the handler through
// ALLOW_FEDERATED_USERS: unset or "false" refuses federated users, "true"
// accepts them, anything else stops the function with the variable named.
func TestAllowFederatedUsersFromTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"", false}, {"false", false}, {"true", true}} {
		t.Run(tc.v, func(t *testing.T) {
			h := testkit.MustBuild(t, build, complete(), testkit.AWSEnv(), map[string]string{"ALLOW_FEDERATED_USERS": tc.v})
			if h.AllowFederatedUsers != tc.want {
				t.Fatalf("handler allows federated users %v; want %v", h.AllowFederatedUsers, tc.want)
			}
		})
	}
	t.Run("yes", func(t *testing.T) {
		testkit.Refuses(t, build, testkit.With(testkit.With(complete(), testkit.AWSEnv()), map[string]string{"ALLOW_FEDERATED_USERS": "yes"}), "ALLOW_FEDERATED_USERS")
	})
}
