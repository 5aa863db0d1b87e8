//go:build integration

package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/examples/internal/exampletest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestShipsEachOrderOnceUnderTheEmulator builds the example's bootstrap
// and runs it under aws-lambda-rie against moto (its markers table, its
// queue, named as its events' source, and its dead-letter queue). Its
// batch event (o-1 twice, under two message ids and spelt differently,
// and o-2), invoked twice, ships each order once, keyed by its id, and
// reports no batch item failure. Then o-1 with another amount is refused
// for its fingerprint: it goes to the dead-letter queue with the reason
// (not a batch item failure: it must not be retried) and never ships.
func TestShipsEachOrderOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newShippingService(t, http.StatusCreated)
	sqsClient := testenv.SQS(t)
	dlq := testenv.NewQueue(t, sqsClient, "orders-dlq", nil)
	work := testenv.CreateQueue(t, sqsClient, "orders", map[string]string{"RedrivePolicy": testenv.RedrivePolicy(dlq.ARN, 5)})
	em := exampletest.Start(ctx, t, exampletest.Function{Example: "orders", Env: map[string]string{
		"SHIP_URL": svc.URL, "MARKERS_TABLE": exampletest.Markers(t, "orders"), "QUEUE_URL": work.URL, "DLQ_URL": dlq.URL,
	}})

	for i := range 2 { // at-least-once: the same batch, twice
		if failed := exampletest.InvokeBatch(ctx, t, em, exampletest.ReadEvent(t, "orders-sqs-batch.json")); len(failed) != 0 {
			t.Fatalf("batch %d: batch item failures %q; want none", i+1, failed)
		}
	}
	want := []shipment{{Key: "o-1", Payload: Order{"o-1", 5}}, {Key: "o-2", Payload: Order{"o-2", 7}}}
	if got := svc.Posts(); len(got) != 2 || !sameShipments(got, want) {
		t.Fatalf("the shipping service got %+v; want %+v, once each", got, want)
	}

	if failed := exampletest.InvokeBatch(ctx, t, em, exampletest.ReadEvent(t, "orders-sqs-other-amount.json")); len(failed) != 0 {
		t.Fatalf("the other amount: batch item failures %q; want it dead-lettered instead", failed)
	}
	if got := svc.Posts(); len(got) != 2 {
		t.Fatalf("the shipping service got %+v; the other amount must never ship", got)
	}
	letters := testenv.Receive(t, sqsClient, dlq.URL, time.Second)
	if len(letters) != 1 {
		t.Fatalf("the dead-letter queue holds %d messages; want the other amount's", len(letters))
	}
	body := aws.ToString(letters[0].Body)
	reason := aws.ToString(letters[0].MessageAttributes[sqsqueue.AttrReason].StringValue)
	if body != `{"orderId":"o-1","amount":9}` || !strings.Contains(reason, engine.ErrFingerprint.Error()) || !strings.Contains(reason, `"o-1"`) {
		t.Fatalf("dead letter %s with reason %q; want the other amount, refused for its fingerprint", body, reason)
	}
}

// sameShipments reports whether got and want hold the same shipments, in
// any order (the batch runs its orders concurrently).
func sameShipments(got, want []shipment) bool {
	if len(got) != len(want) {
		return false
	}
	left := append([]shipment(nil), want...)
	for _, g := range got {
		i := indexOf(left, g)
		if i < 0 {
			return false
		}
		left = append(left[:i], left[i+1:]...)
	}
	return true
}

func indexOf(s []shipment, v shipment) int {
	for i, e := range s {
		if e == v {
			return i
		}
	}
	return -1
}
