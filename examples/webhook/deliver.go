package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/runstwice/runstwice/engine"
)

// Event is a message of the team's own queue: the event to deliver, by its
// id, e.g. {"eventId":"e-1"}. No envelope: the body is the team's JSON.
type Event struct {
	ID string `json:"eventId"`
}

// Deliver is the kind of job: one delivery per event id. The markers live
// under its name, so it stays the same across refactors and deploys; it is
// also the name of the kill switch's parameter. The lease makes a twin of a
// delivery in flight wait instead of posting at the same time, and since
// the receiver dedups by the Idempotency-Key, effect-then-claim (the
// default bias) is right: a crash between the POST and the claim repeats
// the POST, which the receiver absorbs.
var Deliver = engine.Kind[Event]{
	Name:  "webhook.deliver",
	Key:   func(e Event) (string, error) { return e.ID, nil },
	Lease: true,
}

// Webhook posts events to URL.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Deliver POSTs {"eventId": ...} with the job's key as the receiver's
// Idempotency-Key. A 2xx is done; a 4xx other than 408 and 429 is the
// receiver refusing the event for good (Permanent: the dead-letter queue,
// not five retries); anything else is retried.
func (w Webhook) Deliver(ctx context.Context, job engine.Job[Event]) error {
	body, err := json.Marshal(job.Payload)
	if err != nil {
		return engine.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return engine.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", job.Key)
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return engine.Permanent(fmt.Errorf("webhook: the receiver refused the event: HTTP %d", code))
	default:
		return fmt.Errorf("webhook: HTTP %d", code)
	}
}
