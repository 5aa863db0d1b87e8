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

// shippingService is a fake shipping service: it keeps every order POSTed
// to it, with its Idempotency-Key, and answers the status it is made with.
// Its Effects are an order's shipments.
type shippingService = exampletest.Receiver[Order]

// shipment is one POST the shipping service got.
type shipment = exampletest.Post[Order]

func newShippingService(t *testing.T, status int) *shippingService {
	return exampletest.NewReceiver(t, status, func(o Order) string { return o.ID })
}

// shipperAt is the example's shipper, shipping at svc.
func shipperAt(svc *shippingService) Shipper { return Shipper{URL: svc.URL, Client: svc.Client()} }

// TestShipAnswersByTheServicesStatus: a 2xx ships; a 4xx other than 408
// and 429 is permanent; 408, 429, a 5xx and a service that cannot be
// reached are retried; an amount that is not positive is permanent
// before any call. Every POST carries the order and its id as the
// Idempotency-Key.
func TestShipAnswersByTheServicesStatus(t *testing.T) {
	cases := []struct {
		name          string
		status        int
		amount        int
		unreachable   bool
		ok, permanent bool
		posts         int
	}{
		{name: "created", status: http.StatusCreated, amount: 5, ok: true, posts: 1},
		{name: "no content", status: http.StatusNoContent, amount: 5, ok: true, posts: 1},
		{name: "bad request", status: http.StatusBadRequest, amount: 5, permanent: true, posts: 1},
		{name: "conflict", status: http.StatusConflict, amount: 5, permanent: true, posts: 1},
		{name: "request timeout", status: http.StatusRequestTimeout, amount: 5, posts: 1},
		{name: "too many requests", status: http.StatusTooManyRequests, amount: 5, posts: 1},
		{name: "bad gateway", status: http.StatusBadGateway, amount: 5, posts: 1},
		{name: "unreachable", status: http.StatusOK, amount: 5, unreachable: true},
		{name: "zero amount", status: http.StatusOK, amount: 0, permanent: true},
		{name: "negative amount", status: http.StatusOK, amount: -3, permanent: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := newShippingService(t, c.status)
			if c.unreachable {
				svc.Close()
			}
			o := Order{ID: "o-1", Amount: c.amount}
			err := shipperAt(svc).Ship(context.Background(), engine.Job[Order]{Key: o.ID, Payload: o, Attempt: 1, Logger: slog.New(slog.DiscardHandler)})
			if (err == nil) != c.ok || engine.IsPermanent(err) != c.permanent {
				t.Fatalf("Ship = %v; want ok %v, permanent %v", err, c.ok, c.permanent)
			}
			got := svc.Posts()
			if len(got) != c.posts || (c.posts == 1 && got[0] != (shipment{Key: "o-1", Payload: o})) {
				t.Fatalf("the service got %+v; want %d POST(s) of the order keyed by its id", got, c.posts)
			}
		})
	}
}

// TestShipConverges: run through the real runner twice, concurrently and
// across a crash at each step, an order is one shipment at a service that
// dedups by the Idempotency-Key (ExactlyOnce: the crash between the POST
// and the claim repeats the POST, under the same key).
func TestShipConverges(t *testing.T) {
	svc := newShippingService(t, http.StatusCreated)
	enginetest.RunTwice(t, enginetest.Case[Order]{
		Kind:        Ship,
		Work:        shipperAt(svc).Ship,
		New:         func(key string) Order { return Order{ID: key, Amount: 5} },
		Effects:     svc.Effects,
		ExactlyOnce: true,
	})
}

// TestTheEventsShipEachOrderOnce plays the example's events on the
// in-memory store: the batch (o-1 twice, its second copy spelt
// differently, and o-2) twice ships each order once with no batch item
// failure; then o-1 with another amount is dead-lettered for its
// fingerprint, never shipped.
func TestTheEventsShipEachOrderOnce(t *testing.T) {
	svc := newShippingService(t, http.StatusCreated)
	h, dead := exampletest.NewHandler(t, Ship, shipperAt(svc).Ship)
	for i := range 2 {
		batch := exampletest.DecodeEvent[events.SQSEvent](t, "orders-sqs-batch.json")
		if failed := exampletest.Failures(t, h.HandleSQS, batch); len(failed) != 0 {
			t.Fatalf("batch %d: failures %+v", i+1, failed)
		}
	}
	if a, b := svc.Effects("o-1"), svc.Effects("o-2"); a != 1 || b != 1 || len(svc.Posts()) != 2 {
		t.Fatalf("the service got %+v; want o-1 and o-2 once each", svc.Posts())
	}
	other := exampletest.DecodeEvent[events.SQSEvent](t, "orders-sqs-other-amount.json")
	if failed := exampletest.Failures(t, h.HandleSQS, other); len(failed) != 0 {
		t.Fatalf("the other amount: failures %+v; want it dead-lettered", failed)
	}
	reason, ok := dead.DeadReason(other.Records[0].MessageId)
	if !ok || !strings.Contains(reason, engine.ErrFingerprint.Error()) || !strings.Contains(reason, `"o-1"`) {
		t.Fatalf("dead letter of the other amount: %q (%v); want the fingerprint mismatch of o-1", reason, ok)
	}
	if got := svc.Posts(); len(got) != 2 {
		t.Fatalf("the service got %+v; the other amount must never ship", got)
	}
}
