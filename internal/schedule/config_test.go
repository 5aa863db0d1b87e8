package schedule_test

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/testkit"
)

// ConfigFrom reads every variable the one-time schedules need, and a
// missing one is a start-up error naming it.
func TestConfigFrom(t *testing.T) {
	vars := testkit.With(map[string]string{
		"SCHEDULE_GROUP": "runstwice-dev-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::1:role/s", "DLQ_ARN": "arn:aws:sqs:us-east-1:1:dlq",
	}, testkit.WorkQueueEnv("http://q", "arn"))
	env := envvar.New(func(k string) string { return vars[k] })
	c := schedule.ConfigFrom(env)
	if err := env.Err(); err != nil || c.Group != "runstwice-dev-jobs" || c.RoleARN != vars["SCHEDULER_ROLE_ARN"] ||
		c.DLQARN != vars["DLQ_ARN"] || c.QueueARNs[contract.QueueBulk] != "arn:bulk" {
		t.Fatalf("config %+v, %v", c, err)
	}
	delete(vars, "DLQ_ARN")
	env = envvar.New(func(k string) string { return vars[k] })
	schedule.ConfigFrom(env)
	if err := env.Err(); err == nil || !strings.Contains(err.Error(), "DLQ_ARN") {
		t.Fatalf("missing DLQ_ARN: %v; want an error naming it", err)
	}
}
