package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
)

// shippingService is a fake shipping service: it keeps every order POSTed
// to it, with its Idempotency-Key, and answers status.
type shippingService struct {
	*httptest.Server
	status int
	mu     sync.Mutex
	posts  []shipment
}

// shipment is one POST the shipping service got.
type shipment struct {
	Key   string
	Order Order
}

func newShippingService(t *testing.T, status int) *shippingService {
	s := &shippingService{status: status}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o Order
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.posts = append(s.posts, shipment{r.Header.Get("Idempotency-Key"), o})
		s.mu.Unlock()
		w.WriteHeader(s.status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *shippingService) shipments() []shipment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]shipment(nil), s.posts...)
}

// shipped counts the shipments of order id: its POSTs, less those that
// repeat an Idempotency-Key (which the service absorbs). A POST without a
// key is a shipment every time.
func (s *shippingService) shipped(id string) int {
	n, keys := 0, map[string]bool{}
	for _, p := range s.shipments() {
		if p.Order.ID == id && (p.Key == "" || !keys[p.Key]) {
			keys[p.Key] = true
			n++
		}
	}
	return n
}

func (s *shippingService) shipper() Shipper { return Shipper{URL: s.URL, Client: s.Client()} }

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
			err := svc.shipper().Ship(context.Background(), engine.Job[Order]{Key: o.ID, Payload: o, Attempt: 1, Logger: slog.New(slog.DiscardHandler)})
			if (err == nil) != c.ok || engine.IsPermanent(err) != c.permanent {
				t.Fatalf("Ship = %v; want ok %v, permanent %v", err, c.ok, c.permanent)
			}
			got := svc.shipments()
			if len(got) != c.posts || (c.posts == 1 && got[0] != (shipment{"o-1", o})) {
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
		Work:        svc.shipper().Ship,
		New:         func(key string) Order { return Order{ID: key, Amount: 5} },
		Effects:     svc.shipped,
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
	dead := &enginetest.Queues{}
	h, err := engine.NewHandler(Ship, svc.shipper().Ship, engine.Options{
		Store: memstore.New(), DeadLetterer: dead, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if resp := handle(t, h, "orders-sqs-batch.json"); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch %d: failures %+v", i+1, resp.BatchItemFailures)
		}
	}
	if a, b := svc.shipped("o-1"), svc.shipped("o-2"); a != 1 || b != 1 || len(svc.shipments()) != 2 {
		t.Fatalf("the service got %+v; want o-1 and o-2 once each", svc.shipments())
	}
	other := readEvent(t, "orders-sqs-other-amount.json")
	if resp := handle(t, h, "orders-sqs-other-amount.json"); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the other amount: failures %+v; want it dead-lettered", resp.BatchItemFailures)
	}
	reason, ok := dead.DeadReason(other.Records[0].MessageId)
	if !ok || !strings.Contains(reason, engine.ErrFingerprint.Error()) || !strings.Contains(reason, `"o-1"`) {
		t.Fatalf("dead letter of the other amount: %q (%v); want the fingerprint mismatch of o-1", reason, ok)
	}
	if got := svc.shipments(); len(got) != 2 {
		t.Fatalf("the service got %+v; the other amount must never ship", got)
	}
}

// handle runs the event in file through h.
func handle(t *testing.T, h *engine.Handler[Order], file string) events.SQSEventResponse {
	t.Helper()
	resp, err := h.HandleSQS(context.Background(), readEvent(t, file))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readEvent reads events/file.
func readEvent(t *testing.T, file string) events.SQSEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("events", file))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return ev
}
