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

// TestCreditsEachPurchaseOnceUnderTheEmulator builds the example's
// bootstrap and runs it under aws-lambda-rie against moto (its markers
// table and dead-letter queue). Its batch (p-1, p-2, p-1 again as a
// producer's retry put it, and p-3, in one shard), invoked twice, credits
// each purchase once, in the shard's order, keyed by its id, and reports
// no batch item failure.
func TestCreditsEachPurchaseOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newPointsService(t)
	em := startPoints(ctx, t, svc.URL)
	batch := exampletest.ReadEvent(t, "kinesis-batch.json")
	for i := range 2 { // at-least-once: the same batch, twice
		if failed := exampletest.InvokeBatch(ctx, t, em, batch); len(failed) != 0 {
			t.Fatalf("batch %d: batch item failures %q; want none", i+1, failed)
		}
	}
	if got := svc.Posted(); got != "p-1 p-2 p-3" {
		t.Fatalf("the points service got %s; want p-1, p-2 and p-3 once each, in order", got)
	}
	for _, c := range svc.Posts() {
		if c.Key != c.Payload.ID {
			t.Fatalf("the points service got %+v; want each POST keyed by its purchase id", c)
		}
	}
}

// TestAFailedCreditStopsItsShardUnderTheEmulator: with the points service
// down for p-2, the batch answers p-2's sequence number alone as its
// failure, and p-3, after it in the shard, is not run. The retry Lambda
// makes from that sequence number, once the service is back, credits p-2
// and p-3, and p-1 stays credited once.
func TestAFailedCreditStopsItsShardUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newPointsService(t)
	em := startPoints(ctx, t, svc.URL)
	batch := exampletest.DecodeEvent[events.KinesisEvent](t, "kinesis-batch.json")

	svc.Fail("p-2", http.StatusServiceUnavailable)
	failed := exampletest.InvokeBatch(ctx, t, em, exampletest.Marshal(t, batch))
	if want := batch.Records[1].Kinesis.SequenceNumber; len(failed) != 1 || failed[0] != want {
		t.Fatalf("batch item failures %q; want p-2's sequence number %s alone", failed, want)
	}
	if got := svc.Posted(); got != "p-1 p-2" {
		t.Fatalf("the points service got %s; want p-1, then p-2 failing, and nothing after it", got)
	}

	svc.Fail("p-2", 0)
	if failed := exampletest.InvokeBatch(ctx, t, em, exampletest.Marshal(t, events.KinesisEvent{Records: batch.Records[1:]})); len(failed) != 0 {
		t.Fatalf("the retry from p-2: batch item failures %q; want none", failed)
	}
	if got := svc.Posted(); got != "p-1 p-2 p-2 p-3" {
		t.Fatalf("the points service got %s; want p-2 again on the retry, then p-3", got)
	}
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		if n := svc.Effects(id); n != 1 {
			t.Errorf("%s credited %d times; want once", id, n)
		}
	}
}

// startPoints builds the example's bootstrap and starts it under
// aws-lambda-rie against moto, crediting at pointsURL, with a markers
// table and a dead-letter queue of its own.
func startPoints(ctx context.Context, t *testing.T, pointsURL string) *lambdarie.Emulator {
	t.Helper()
	return exampletest.Start(ctx, t, exampletest.Function{Example: "kinesis", Env: map[string]string{
		"POINTS_URL":    pointsURL,
		"MARKERS_TABLE": exampletest.Markers(t, "kinesis"),
		"DLQ_URL":       testenv.NewQueue(t, testenv.SQS(t), "kinesis-dlq", nil).URL,
	}})
}
