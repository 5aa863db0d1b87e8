package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/testkit"
)

func TestBuildNeedsEveryVariable(t *testing.T) {
	vars := testkit.With(map[string]string{
		"STAGE": "dev", "IDEMPOTENCY_TABLE": "idem", "JOBS_TABLE": "jobs", "MARKERS_TABLE": "markers",
		"SCHEDULE_GROUP": "runstwice-dev-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
		"DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:dlq",
	}, testkit.WorkQueueEnv("http://q", "arn:aws:sqs:us-east-1:123456789012"))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	log := obs.NewLogger(io.Discard, "error")
	for missing := range vars {
		t.Run(missing, func(t *testing.T) {
			for k, v := range vars {
				if k == missing {
					v = ""
				}
				t.Setenv(k, v)
			}
			if _, err := build(context.Background(), log); err == nil || !strings.Contains(err.Error(), missing) {
				t.Fatalf("build without %s: %v", missing, err)
			}
		})
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	h, err := build(context.Background(), log)
	if err != nil || h.Registry == nil || h.Idempotency == nil || h.Jobs == nil || h.Queue == nil || h.Schedules == nil {
		t.Fatalf("build: %+v, %v", h, err)
	}
}

// The template's AllowFederatedUsers reaches the handler through
// ALLOW_FEDERATED_USERS: unset or "false" refuses federated users, "true"
// accepts them, anything else stops the function with the variable named.
func TestAllowFederatedUsersFromTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
		bad  bool
	}{{"", false, false}, {"false", false, false}, {"true", true, false}, {"yes", false, true}} {
		t.Run(tc.v, func(t *testing.T) {
			for name, v := range testkit.With(map[string]string{
				"STAGE": "local", "IDEMPOTENCY_TABLE": "i", "JOBS_TABLE": "j", "MARKERS_TABLE": "m",
				"SCHEDULE_GROUP": "g", "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/s", "DLQ_ARN": "arn:dlq",
				"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
				"ALLOW_FEDERATED_USERS": tc.v,
			}, testkit.WorkQueueEnv("http://q", "arn")) {
				t.Setenv(name, v)
			}
			h, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), "ALLOW_FEDERATED_USERS") {
					t.Fatalf("err %v; want ALLOW_FEDERATED_USERS named", err)
				}
				return
			}
			if err != nil || h.AllowFederatedUsers != tc.want {
				t.Fatalf("handler allows federated users %v, err %v; want %v", h != nil && h.AllowFederatedUsers, err, tc.want)
			}
		})
	}
}
