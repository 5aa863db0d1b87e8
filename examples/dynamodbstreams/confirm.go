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

// Order is an item of the team's orders table, as the engine hands it to
// Decode: the stream record's image in plain JSON, {"orderId":"o-1",
// "total":42.50,...}, strings as strings, numbers as written, lists,
// maps, sets as arrays, null. Attributes it does not name are ignored.
type Order struct {
	ID    string `json:"orderId"`
	Email string `json:"email"`
	// Total keeps the number's digits as the table holds them (42.50 stays
	// 42.50): money never goes through a float.
	Total    json.Number `json:"total"`
	Currency string      `json:"currency"`
	Items    []Item      `json:"items"`
	Status   string      `json:"status"`
}

// Item is a line of an order (a map in the item's items list).
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Confirm is the kind of job: each order gets one confirmation, keyed by
// its order id. Every stream record of an order stands for it: its
// INSERT's new image, a MODIFY's new image, a REMOVE's old image. The
// first of them to run confirms the order, and the others find its key
// done and are dropped without a call. DynamoDB Streams keeps an item's
// changes in order in one shard, and the engine runs a shard in order,
// stopping at a failure, so that first is the order's INSERT unless the
// INSERT was never read (the mapping started after it, or it aged out of
// the stream's 24 hours): then the order's next record confirms it, late
// rather than never.
//
// It has no fingerprint: a MODIFY's image differs from the INSERT's (a
// status changed) and is still the same order, not a key reused. It
// takes no lease: a shard is read by one invocation at a time, and an
// order's records are all in its shard.
var Confirm = engine.Kind[Order]{
	Name: "orders.confirm",
	Key:  func(o Order) (string, error) { return o.ID, nil },
}

// errOrder refuses an order that cannot be confirmed.
var errOrder = errors.New("orders: an order needs an e-mail address and a total")

// Confirmer asks the notification service at URL to send confirmations.
type Confirmer struct {
	URL    string
	Client *http.Client
}

// confirmation is what the notification service is sent.
type confirmation struct {
	OrderID  string      `json:"orderId"`
	Email    string      `json:"email"`
	Total    json.Number `json:"total"`
	Currency string      `json:"currency"`
	Lines    int         `json:"lines"`
}

// Confirm POSTs the order's confirmation with the order id as the
// notification service's Idempotency-Key, so a confirmation the engine
// repeats (a crash between the POST and the claim) is one message. A 2xx
// is sent; a 4xx other than 408 and 429 is the service refusing it for
// good, and an order without an e-mail address or a total is refused
// before any call (Permanent: the dead-letter queue with the reason, and
// the shard goes on); anything else fails the record, which stops its
// shard there: Lambda retries from it, and the records after it wait.
func (c Confirmer) Confirm(ctx context.Context, job engine.Job[Order]) error {
	o := job.Payload
	if o.Email == "" || o.Total == "" {
		return engine.Permanent(fmt.Errorf("%w: order %s", errOrder, job.Key))
	}
	body, err := json.Marshal(confirmation{OrderID: o.ID, Email: o.Email, Total: o.Total, Currency: o.Currency, Lines: len(o.Items)})
	if err != nil {
		return engine.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return engine.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", job.Key)
	resp, err := c.Client.Do(req)
	if err != nil {
		return fmt.Errorf("orders: confirm %s: %w", job.Key, err)
	}
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		job.Logger.InfoContext(ctx, "order confirmed", "lines", len(o.Items))
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return engine.Permanent(fmt.Errorf("orders: the notification service refused order %s: HTTP %d", job.Key, code))
	default:
		return fmt.Errorf("orders: confirm %s: HTTP %d", job.Key, code)
	}
}
