package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/examples/internal/exampletest"
)

// notifier is a fake notification service: it keeps every confirmation
// POSTed to it, with its Idempotency-Key, and answers 202, or the status
// Fail names for an order id. Its Effects are an order's confirmations.
type notifier = exampletest.Receiver[confirmation]

// sent is one POST the notification service got: its Idempotency-Key
// and its body as written.
type sent = exampletest.Sent

func newNotifier(t *testing.T) *notifier {
	return exampletest.NewReceiver(t, http.StatusAccepted, func(c confirmation) string { return c.OrderID })
}

// confirmerAt is the example's confirmer, confirming at svc.
func confirmerAt(svc *notifier) Confirmer { return Confirmer{URL: svc.URL, Client: svc.Client()} }

// TestConfirmAnswersByTheServicesStatus: a 2xx is sent; a 4xx other than
// 408 and 429 is permanent; 408, 429, a 5xx and a service that cannot be
// reached fail the record (its shard stops there, to be retried); an
// order without an e-mail address or a total is permanent before any
// call. Every POST carries the confirmation, its total's digits as the
// table holds them, and the order id as the Idempotency-Key.
func TestConfirmAnswersByTheServicesStatus(t *testing.T) {
	order := Order{ID: "o-1", Email: "ana@example.com", Total: "42.50", Currency: "EUR", Items: []Item{{"sku-tea", 2}, {"sku-mug", 1}}}
	const body = `{"orderId":"o-1","email":"ana@example.com","total":42.50,"currency":"EUR","lines":2}`
	cases := []struct {
		name          string
		status        int
		order         func(Order) Order
		unreachable   bool
		ok, permanent bool
		posts         int
	}{
		{name: "accepted", status: http.StatusAccepted, ok: true, posts: 1},
		{name: "ok", status: http.StatusOK, ok: true, posts: 1},
		{name: "bad request", status: http.StatusBadRequest, permanent: true, posts: 1},
		{name: "gone", status: http.StatusGone, permanent: true, posts: 1},
		{name: "request timeout", status: http.StatusRequestTimeout, posts: 1},
		{name: "too many requests", status: http.StatusTooManyRequests, posts: 1},
		{name: "bad gateway", status: http.StatusBadGateway, posts: 1},
		{name: "unreachable", status: http.StatusAccepted, unreachable: true},
		{name: "no e-mail", status: http.StatusAccepted, order: func(o Order) Order { o.Email = ""; return o }, permanent: true},
		{name: "no total", status: http.StatusAccepted, order: func(o Order) Order { o.Total = ""; return o }, permanent: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := newNotifier(t)
			if c.status != http.StatusAccepted {
				svc.Fail("o-1", c.status)
			}
			if c.unreachable {
				svc.Close()
			}
			o := order
			if c.order != nil {
				o = c.order(o)
			}
			job := engine.Job[Order]{Key: o.ID, Payload: o, Attempt: 1, Logger: slog.New(slog.DiscardHandler)}
			err := confirmerAt(svc).Confirm(context.Background(), job)
			if (err == nil) != c.ok || engine.IsPermanent(err) != c.permanent {
				t.Fatalf("Confirm = %v; want ok %v, permanent %v", err, c.ok, c.permanent)
			}
			got := svc.Sent()
			if len(got) != c.posts || (c.posts == 1 && got[0] != (sent{Key: "o-1", Body: body})) {
				t.Fatalf("the service got %+v; want %d POST(s) of %s keyed by the order id", got, c.posts, body)
			}
		})
	}
}

// TestConfirmConverges: delivered from a DynamoDB stream through the real
// runner twice, concurrently and across a crash at each step, an order is
// one confirmation at a service that dedups by the Idempotency-Key
// (ExactlyOnce: the crash between the POST and the claim repeats the
// POST, under the same key).
func TestConfirmConverges(t *testing.T) {
	svc := newNotifier(t)
	enginetest.RunTwice(t, enginetest.Case[Order]{
		Kind: Confirm,
		Work: confirmerAt(svc).Confirm,
		New: func(key string) Order {
			return Order{ID: key, Email: "ana@example.com", Total: "42.50", Currency: "EUR", Items: []Item{{"sku-tea", 2}}}
		},
		Effects:     svc.Effects,
		ExactlyOnce: true,
		Source:      enginetest.DynamoDB,
	})
}

// TestTheBatchConfirmsEachOrderOnce plays the example's event on the
// in-memory store twice (o-1 and o-2 inserted, o-1 modified, o-2 removed,
// o-3 inserted, in one shard): each order is confirmed once, from its
// INSERT's image read as the table holds it (42.50 with its digits, the
// lines of its items list); the MODIFY and the REMOVE (whose old image
// names o-2) are dropped as done, and nothing fails.
func TestTheBatchConfirmsEachOrderOnce(t *testing.T) {
	svc := newNotifier(t)
	h, dead := exampletest.NewHandler(t, Confirm, confirmerAt(svc).Confirm)
	batch := exampletest.DecodeEvent[events.DynamoDBEvent](t, "dynamodb-batch.json")
	for i := range 2 {
		if failed := exampletest.Failures(t, h.HandleDynamoDB, batch); len(failed) != 0 {
			t.Fatalf("batch %d: failures %v", i+1, failed)
		}
	}
	want := []sent{
		{Key: "o-1", Body: `{"orderId":"o-1","email":"ana@example.com","total":42.50,"currency":"EUR","lines":2}`},
		{Key: "o-2", Body: `{"orderId":"o-2","email":"ben@example.com","total":7.99,"currency":"EUR","lines":1}`},
		{Key: "o-3", Body: `{"orderId":"o-3","email":"chloe@example.com","total":120,"currency":"EUR","lines":2}`},
	}
	if got := svc.Sent(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("the service got %+v; want %+v, in order", got, want)
	}
	if n := dead.DeadCount(); n != 0 {
		t.Fatalf("%d records dead-lettered; want none (the REMOVE's old image names its order)", n)
	}
}

// TestAFailedConfirmationStopsItsShard: with the notification service down
// for o-2, the batch stops at o-2's INSERT: the response names its
// sequence number alone, and the records after it (o-3 among them) are
// not run. Lambda retries from o-2 once the service is back: o-2 and o-3
// are confirmed, and a replay of the whole batch confirms nothing again.
func TestAFailedConfirmationStopsItsShard(t *testing.T) {
	svc := newNotifier(t)
	h, _ := exampletest.NewHandler(t, Confirm, confirmerAt(svc).Confirm)
	batch := exampletest.DecodeEvent[events.DynamoDBEvent](t, "dynamodb-batch.json")
	svc.Fail("o-2", http.StatusServiceUnavailable)
	failed := exampletest.Failures(t, h.HandleDynamoDB, batch)
	if want := batch.Records[1].Change.SequenceNumber; len(failed) != 1 || failed[0] != want {
		t.Fatalf("failures %v; want o-2's sequence number %s alone", failed, want)
	}
	if got := svc.Posted(); got != "o-1 o-2" {
		t.Fatalf("the service got %s; want o-1, then o-2 failing, and nothing after it", got)
	}

	svc.Fail("o-2", 0)
	if failed := exampletest.Failures(t, h.HandleDynamoDB, events.DynamoDBEvent{Records: batch.Records[1:]}); len(failed) != 0 {
		t.Fatalf("the retry from o-2: failures %v", failed)
	}
	if failed := exampletest.Failures(t, h.HandleDynamoDB, batch); len(failed) != 0 {
		t.Fatalf("the replay: failures %v", failed)
	}
	if got := svc.Posted(); got != "o-1 o-2 o-2 o-3" {
		t.Fatalf("the service got %s; want o-2 again on the retry, then o-3", got)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if n := svc.Effects(id); n != 1 {
			t.Errorf("%s confirmed %d times; want once", id, n)
		}
	}
}

// TestARecordThatCanNeverSucceedIsDeadLettered: an order without an
// e-mail address, and a REMOVE without its old image (what a stream
// that keeps only new images sends), go to the dead-letter queue with
// their reasons, never confirmed, and the shard goes on past them: the
// order after them is confirmed and nothing is retried.
func TestARecordThatCanNeverSucceedIsDeadLettered(t *testing.T) {
	svc := newNotifier(t)
	h, dead := exampletest.NewHandler(t, Confirm, confirmerAt(svc).Confirm)
	image := func(object string) map[string]events.DynamoDBAttributeValue {
		img, err := enginetest.Image([]byte(object))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	record := func(name, seq string, img map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
		r := events.DynamoDBEventRecord{EventName: name, EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-12-01T00:00:00.000"}
		r.Change.SequenceNumber = seq
		if name == "INSERT" {
			r.Change.NewImage = img
		}
		return r
	}
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("INSERT", "900", image(`{"orderId":"o-7","total":5}`)),
		record("REMOVE", "901", nil),
		record("INSERT", "902", image(`{"orderId":"o-8","email":"dan@example.com","total":5,"currency":"EUR"}`)),
	}}
	if failed := exampletest.Failures(t, h.HandleDynamoDB, batch); len(failed) != 0 {
		t.Fatalf("failures %v; want the bad records dead-lettered and the shard gone on", failed)
	}
	for seq, want := range map[string]string{"900": errOrder.Error(), "901": "has no key"} {
		if reason, ok := dead.DeadReason(seq); !ok || !strings.Contains(reason, want) {
			t.Errorf("dead letter of %s: %q (%v); want a reason with %q", seq, reason, ok, want)
		}
	}
	if got := svc.Posted(); got != "o-8" {
		t.Fatalf("the service got %s; want o-8 alone", got)
	}
}
