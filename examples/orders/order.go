package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/runstwice/runstwice/engine"
)

// Order is a message of the team's own orders queue, its own JSON:
// {"orderId":"o-1","amount":5}. No envelope.
type Order struct {
	ID     string `json:"orderId"`
	Amount int    `json:"amount"`
}

// Ship is the kind of job: each order ships once, keyed by its id. The
// markers live under its name, so it stays the same across refactors and
// deploys. Its fingerprint is the order as JSON (re-encoded from the
// decoded Order, so the field order and spacing of the message do not
// count): the same order id with another amount is refused
// (engine.ErrFingerprint) and dead-lettered, never shipped. The lease
// makes a twin of an order being shipped wait instead of shipping it at
// the same time.
var Ship = engine.Kind[Order]{
	Name:        "orders.ship",
	Key:         func(o Order) (string, error) { return o.ID, nil },
	Fingerprint: func(o Order) ([]byte, error) { return json.Marshal(o) },
	Lease:       true,
}

// errAmount refuses an order that has nothing to ship.
var errAmount = errors.New("orders: the amount must be positive")

// Shipper asks the shipping service at URL to ship orders.
type Shipper struct {
	URL    string
	Client *http.Client
}

// Ship POSTs the order with its id as the shipping service's
// Idempotency-Key, so a shipment the engine repeats (a crash between the
// POST and the claim) is one shipment. A 2xx is shipped; a 4xx other than
// 408 and 429 is the service refusing the order for good, and an order
// without a positive amount is refused before any call (Permanent: the
// dead-letter queue with the reason, never retried); anything else is
// retried.
func (s Shipper) Ship(ctx context.Context, job engine.Job[Order]) error {
	if job.Payload.Amount <= 0 {
		return engine.Permanent(fmt.Errorf("%w: order %s has %d", errAmount, job.Key, job.Payload.Amount))
	}
	body, err := json.Marshal(job.Payload)
	if err != nil {
		return engine.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return engine.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", job.Key)
	resp, err := s.Client.Do(req)
	if err != nil {
		return fmt.Errorf("orders: ship %s: %w", job.Key, err)
	}
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		job.Logger.InfoContext(ctx, "order shipped", "amount", job.Payload.Amount)
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return engine.Permanent(fmt.Errorf("orders: the shipping service refused order %s: HTTP %d", job.Key, code))
	default:
		return fmt.Errorf("orders: ship %s: HTTP %d", job.Key, code)
	}
}
