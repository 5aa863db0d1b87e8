//go:build integration

package main

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/examples/internal/exampletest"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// The event's record comes from the queue webhook-jobs (its
// EventSourceARN), with the event e-1.
const (
	queueName = "webhook-jobs"
	eventID   = "e-1"
)

// post is one POST the receiver got: its Idempotency-Key and its body.
type post = exampletest.Sent

// newReceiver is a webhook receiver that keeps every POST and answers 202.
func newReceiver(t *testing.T) *exampletest.Receiver[Event] {
	return exampletest.NewReceiver(t, http.StatusAccepted, func(e Event) string { return e.ID })
}

// TestDeliversOnceUnderTheEmulator builds the example's bootstrap, runs it
// under aws-lambda-rie against moto (its markers table; no switch
// parameter, so the kind's default, on) and invokes it with its event
// twice: the receiver gets one POST of the event, whose Idempotency-Key is
// the event id, and neither invocation reports a batch item failure.
func TestDeliversOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rcv := newReceiver(t)
	em, _ := startExample(ctx, t, rcv.URL, nil)
	event := readEvent(t)
	for i := range 2 { // at-least-once: the same record, twice
		invokeClean(ctx, t, em, event, i+1)
	}
	if got := rcv.Sent(); len(got) != 1 || got[0] != (post{Key: eventID, Body: `{"eventId":"e-1"}`}) {
		t.Fatalf("the receiver got %q; want one POST of the event keyed by its id", got)
	}
}

// TestSwitchedOffDeliveryIsParked: with the kind's switch parameter off
// in SSM, the record is not delivered and not failed: it is parked, sent
// back to its queue with a delay, and the receiver gets nothing.
func TestSwitchedOffDeliveryIsParked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rcv := newReceiver(t)
	const offPath = "/webhook/off/toggles" // its own path: the other tests' switch stays on
	_, err := testenv.SSM(t).PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(offPath + "/" + Deliver.Name), Value: aws.String("off"),
		Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	em, work := startExample(ctx, t, rcv.URL, map[string]string{"TOGGLES_PATH": offPath})
	before := delayed(ctx, t, work.URL)
	invokeClean(ctx, t, em, readEvent(t), 1)
	if got := rcv.Sent(); len(got) != 0 {
		t.Fatalf("the receiver got %q while the switch was off", got)
	}
	if n := delayed(ctx, t, work.URL); n != before+1 {
		t.Fatalf("the work queue holds %d delayed messages, %d before the invocation; want the parked record too", n, before)
	}
}

// delayed is how many delayed messages the queue at url holds.
func delayed(ctx context.Context, t *testing.T, url string) int {
	t.Helper()
	name := sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed
	out, err := testenv.SQS(t).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{name},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out.Attributes[string(name)])
	if err != nil {
		t.Fatalf("%s of %s: %v", name, url, err)
	}
	return n
}

// TestTracedExampleFlushesItsSpans: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// the engine makes the record's CONSUMER span "webhook-jobs process"
// (service webhook-example, naming the job by its key) and the function
// flushes it: it is at the OTLP receiver when the invocation returns.
func TestTracedExampleFlushesItsSpans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rcv := newReceiver(t)
	spans, err := otlp.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spans.Close()
	em, _ := startExample(ctx, t, rcv.URL, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": spans.URL})
	invokeClean(ctx, t, em, readEvent(t), 1)
	_, got := spans.Trace(eventID) // at once: the flush came before the answer
	if len(got) != 1 || got[0].Name != queueName+" process" || got[0].Kind != "consumer" || got[0].Service != "webhook-example" {
		t.Fatalf("spans at the receiver when the invocation returned: %+v; want the record's span", got)
	}
}

// togglesPath is where the example reads its switches in these tests.
const togglesPath = "/webhook/test/toggles"

// startExample builds the example's bootstrap and starts it under
// aws-lambda-rie against moto, posting to webhookURL, with env added to its
// environment. Its markers table, its work queue (named as the event's
// source) and its dead-letter queue are created first; it returns the work
// queue too.
func startExample(ctx context.Context, t *testing.T, webhookURL string, env map[string]string) (*lambdarie.Emulator, testenv.Queue) {
	t.Helper()
	dlq := testenv.NewQueue(t, testenv.SQS(t), "webhook-dlq", nil)
	work := testenv.CreateQueue(t, testenv.SQS(t), queueName, nil)
	vars := map[string]string{
		"WEBHOOK_URL": webhookURL, "MARKERS_TABLE": exampletest.Markers(t, "webhook"), "TOGGLES_PATH": togglesPath,
		"QUEUE_URL": work.URL, "DLQ_URL": dlq.URL,
	}
	maps.Copy(vars, env)
	return exampletest.Start(ctx, t, exampletest.Function{Example: "webhook", Env: vars}), work
}

// readEvent reads the example's event.
func readEvent(t *testing.T) []byte {
	t.Helper()
	return exampletest.ReadEvent(t, "deliver.json")
}

// invokeClean invokes the function with event and fails the test unless it
// answers with no batch item failures.
func invokeClean(ctx context.Context, t *testing.T, em *lambdarie.Emulator, event []byte, n int) {
	t.Helper()
	if failed := exampletest.InvokeBatch(ctx, t, em, event); len(failed) != 0 {
		t.Fatalf("invoke %d: batch item failures %q; want none", n, failed)
	}
}
