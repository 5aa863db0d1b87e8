package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/testkit"
)

// TestAuditRelayAsDeployedHasItsRequestLayer builds the outbox function
// exactly as Lambda does (build, from its environment as template.yaml
// sets it) and relays one valid INSERT of an outbox item.
//
// Scenario: since 8b67470 the relay enqueues through the request layer
// (enqueue.Handler.EnqueueFor calls runOnce, which calls
// h.Idempotency.Begin first). functions/outbox/main.go still builds the
// handler "without its request layer": Idempotency is nil, the template
// gives the function no IDEMPOTENCY_TABLE and its role no access to the
// idempotency table. What goes wrong: every valid item panics the relay
// (a nil interface call) before any write; Lambda retries the batch 10
// times, bisecting, then sends it to OutboxFailureQueue and moves on, so
// every job a producer committed through the outbox is lost in a deployed
// stack (only bad items, refused before the request layer, still work).
//
// A fix must guarantee: the deployed relay has a request layer (build
// reads IDEMPOTENCY_TABLE, the template sets it and grants the role the
// idempotency table's actions, docs/deploy.md stops saying "No idempotency
// table"), and relaying a valid item never panics: with its tables
// unreachable it is a batch item failure, retried.
func TestAuditRelayAsDeployedHasItsRequestLayer(t *testing.T) {
	relay := testkit.MustBuild(t, build, map[string]string{
		"STAGE": "dev", "JOBS_TABLE": "jobs", "MARKERS_TABLE": "markers", "DEAD_LETTERS_TABLE": "letters",
		"IDEMPOTENCY_TABLE": "idem", // what a fixed template passes; today's build ignores it
		"SCHEDULE_GROUP":    "runstwice-dev-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
		"DLQ_ARN": "arn:aws:sqs:us-east-1:123456789012:dlq",
		// Nothing listens here: every AWS call fails at once.
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_MAX_ATTEMPTS": "1",
	}, testkit.WorkQueueEnv("http://127.0.0.1:1", "arn:aws:sqs:us-east-1:123456789012"), testkit.AWSEnv())
	if h, ok := relay.Enqueuer.(*enqueue.Handler); ok && h.Idempotency == nil {
		t.Errorf("the deployed relay's enqueue.Handler has no Idempotency, but EnqueueFor runs every item under the request layer")
	}
	s := events.NewStringAttribute
	img := map[string]events.DynamoDBAttributeValue{
		"pk": s("signup#k-1"), "producer": s("signup"), "idempotencyKey": s("k-1"), "type": s("email.welcome.v1"),
		"args": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"userId": s("u-1")}), "expiresAt": events.NewNumberAttribute("1900000000"),
	}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventID: "ev-1", EventName: "INSERT", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: "1001", StreamViewType: "NEW_IMAGE"}}}}
	var resp events.DynamoDBEventResponse
	panicked := func() (p any) {
		defer func() { p = recover() }()
		resp, _ = relay.Handle(context.Background(), ev)
		return nil
	}()
	if panicked != nil {
		t.Fatalf("relaying a valid outbox item panicked the relay: %v; Lambda retries it 10 times and drops it to the failure queue: the job is lost", fmt.Sprint(panicked))
	}
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("batch item failures %+v; want the item retried (its tables are unreachable)", resp.BatchItemFailures)
	}
}
