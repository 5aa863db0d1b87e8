package client_test

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/testkit"
)

// TestClientLinksNoWorker: a producer that imports the client gets the job
// contract (the declarations, the body and outbox item rules) and nothing of
// the workers: no e-mail, dead-letter, outbox-relay, enqueue or jobs
// package, and no SQS, SES, Scheduler or SSM service client.
func TestClientLinksNoWorker(t *testing.T) {
	deps := testkit.Deps(t, ".")
	const mod = "github.com/runstwice/runstwice/"
	forbidden := []string{
		mod + "internal/email", mod + "internal/deadletter", mod + "internal/outbox", mod + "internal/enqueue",
		mod + "internal/jobs", mod + "internal/schedule", mod + "internal/marker",
		"github.com/aws/aws-sdk-go-v2/service/sqs", "github.com/aws/aws-sdk-go-v2/service/sesv2",
		"github.com/aws/aws-sdk-go-v2/service/scheduler", "github.com/aws/aws-sdk-go-v2/service/ssm",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("the client links %s", d)
			}
		}
	}
}
