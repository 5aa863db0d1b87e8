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

// Purchase is a record of the team's own purchases stream, its own JSON
// ({"purchaseId":"p-1","customerId":"c-7","amount":12}), put with the
// customer id as its partition key, so one customer's purchases are in
// one shard, in order. No envelope.
type Purchase struct {
	ID       string `json:"purchaseId"`
	Customer string `json:"customerId"`
	Amount   int    `json:"amount"`
}

// Credit is the kind of job: each purchase credits its customer's loyalty
// points once, keyed by the purchase id. A producer that retries a
// PutRecord whose answer it lost puts the purchase twice, under two
// sequence numbers: the second finds the key done and is dropped, as is a
// record Lambda replays from an older checkpoint.
//
// Its fingerprint is the purchase as JSON (re-encoded, so the field order
// and spacing of the record do not count): a purchase id reused with
// another amount is refused (engine.ErrFingerprint) and dead-lettered,
// never credited. It takes no lease: Lambda reads a shard with one
// invocation at a time (with a parallelization factor, a partition key
// with one at a time), and a twin record has the same partition key, so
// no twin ever runs at the same time, and the lease's write would buy
// nothing.
var Credit = engine.Kind[Purchase]{
	Name:        "points.credit",
	Key:         func(p Purchase) (string, error) { return p.ID, nil },
	Fingerprint: func(p Purchase) ([]byte, error) { return json.Marshal(p) },
}

// errPurchase refuses a purchase that cannot be credited.
var errPurchase = errors.New("points: a purchase needs a customer and a positive amount")

// Points asks the loyalty points service at URL to credit purchases.
type Points struct {
	URL    string
	Client *http.Client
}

// Credit POSTs the purchase with its id as the points service's
// Idempotency-Key, so a credit the engine repeats (a crash between the
// POST and the claim) is one credit. A 2xx is credited; a 4xx other than
// 408 and 429 is the service refusing the purchase for good, and a
// purchase without a customer or a positive amount is refused before any
// call (Permanent: the dead-letter queue with the reason, and the shard
// goes on); anything else fails the record, which stops its shard there:
// Lambda retries from it, and the purchases after it wait, in order.
func (p Points) Credit(ctx context.Context, job engine.Job[Purchase]) error {
	if job.Payload.Customer == "" || job.Payload.Amount <= 0 {
		return engine.Permanent(fmt.Errorf("%w: purchase %s", errPurchase, job.Key))
	}
	body, err := json.Marshal(job.Payload)
	if err != nil {
		return engine.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return engine.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", job.Key)
	resp, err := p.Client.Do(req)
	if err != nil {
		return fmt.Errorf("points: credit %s: %w", job.Key, err)
	}
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		job.Logger.InfoContext(ctx, "points credited", "customerId", job.Payload.Customer, "amount", job.Payload.Amount)
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return engine.Permanent(fmt.Errorf("points: the points service refused purchase %s: HTTP %d", job.Key, code))
	default:
		return fmt.Errorf("points: credit %s: HTTP %d", job.Key, code)
	}
}
