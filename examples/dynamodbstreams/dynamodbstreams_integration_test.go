//go:build integration

package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/examples/internal/exampletest"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestConfirmsEachOrderOnceUnderTheEmulator builds the example's bootstrap
// and runs it under aws-lambda-rie against moto (its markers table and
// dead-letter queue). Its batch (o-1 and o-2 inserted, o-1 modified, o-2
// removed, o-3 inserted, in one shard), invoked twice, confirms each
// order once, in the shard's order, keyed by its id, with the total's
// digits as the table holds them, and reports no batch item failure.
func TestConfirmsEachOrderOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newNotifier(t)
	em := startConfirm(ctx, t, svc.URL)
	batch := exampletest.ReadEvent(t, "dynamodb-batch.json")
	for i := range 2 { // at-least-once: the same batch, twice
		if failed := exampletest.InvokeBatch(ctx, t, em, batch); len(failed) != 0 {
			t.Fatalf("batch %d: batch item failures %q; want none", i+1, failed)
		}
	}
	if got := svc.Posted(); got != "o-1 o-2 o-3" {
		t.Fatalf("the notification service got %s; want o-1, o-2 and o-3 once each, in order", got)
	}
	first := svc.Sent()[0]
	if want := (sent{Key: "o-1", Body: `{"orderId":"o-1","email":"ana@example.com","total":42.50,"currency":"EUR","lines":2}`}); first != want {
		t.Fatalf("the first confirmation is %+v; want %+v", first, want)
	}
}

// TestAFailedConfirmationStopsItsShardUnderTheEmulator: with the
// notification service down for o-2, the batch answers the sequence
// number of o-2's INSERT alone as its failure, and the records after it
// (o-3 among them) are not run. The retry Lambda makes from that
// sequence number, once the service is back, confirms o-2 and o-3, and
// o-1 stays confirmed once.
func TestAFailedConfirmationStopsItsShardUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newNotifier(t)
	em := startConfirm(ctx, t, svc.URL)
	batch := exampletest.DecodeEvent[events.DynamoDBEvent](t, "dynamodb-batch.json")

	svc.Fail("o-2", http.StatusServiceUnavailable)
	failed := exampletest.InvokeBatch(ctx, t, em, exampletest.Marshal(t, batch))
	if want := batch.Records[1].Change.SequenceNumber; len(failed) != 1 || failed[0] != want {
		t.Fatalf("batch item failures %q; want o-2's sequence number %s alone", failed, want)
	}
	if got := svc.Posted(); got != "o-1 o-2" {
		t.Fatalf("the notification service got %s; want o-1, then o-2 failing, and nothing after it", got)
	}

	svc.Fail("o-2", 0)
	if failed := exampletest.InvokeBatch(ctx, t, em, exampletest.Marshal(t, events.DynamoDBEvent{Records: batch.Records[1:]})); len(failed) != 0 {
		t.Fatalf("the retry from o-2: batch item failures %q; want none", failed)
	}
	if got := svc.Posted(); got != "o-1 o-2 o-2 o-3" {
		t.Fatalf("the notification service got %s; want o-2 again on the retry, then o-3", got)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if n := svc.Effects(id); n != 1 {
			t.Errorf("%s confirmed %d times; want once", id, n)
		}
	}
}

// startConfirm builds the example's bootstrap and starts it under
// aws-lambda-rie against moto, confirming at confirmURL, with a markers
// table and a dead-letter queue of its own.
func startConfirm(ctx context.Context, t *testing.T, confirmURL string) *lambdarie.Emulator {
	t.Helper()
	return exampletest.Start(ctx, t, exampletest.Function{Example: "dynamodbstreams", Env: map[string]string{
		"CONFIRM_URL":   confirmURL,
		"MARKERS_TABLE": exampletest.Markers(t, "dynamodbstreams"),
		"DLQ_URL":       testenv.NewQueue(t, testenv.SQS(t), "dynamodbstreams-dlq", nil).URL,
	}})
}
