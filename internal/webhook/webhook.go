// Package webhook is the bundle's webhook delivery, webhook.deliver.v1: it
// POSTs an event, named by its id, to the configured receiver with the job
// id as the Idempotency-Key, so a delivery the engine repeats is one event
// at a receiver that dedups by that key.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
)

// IdempotencyKeyHeader is the request header that carries the job id.
const IdempotencyKeyHeader = "Idempotency-Key"

// Config is what the webhook handler needs.
type Config struct {
	// URL is where every event is POSTed (an absolute http or https URL).
	URL string
	// Client sends the requests; its Timeout bounds one delivery.
	Client *http.Client
}

// Event is the body POSTed to the receiver.
type Event struct {
	// EventID is the job's eventId arg.
	EventID string `json:"eventId"`
	// JobID is the job id, the same as the Idempotency-Key header.
	JobID string `json:"jobId"`
	// Type is the job type, webhook.deliver.v1.
	Type string `json:"type"`
}

// Handlers returns the webhook handler, keyed by type name, ready for
// runner.Config.Handlers. It refuses a URL that is not absolute http(s)
// and a nil client.
func Handlers(cfg Config) (map[string]runner.Handler, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook: the URL %q is not an absolute http or https URL", cfg.URL)
	}
	if cfg.Client == nil {
		return nil, errors.New("webhook: an HTTP client is required")
	}
	p := poster{url: u.String(), client: cfg.Client}
	return map[string]runner.Handler{contract.WebhookDeliver.Name: runner.Typed(p.deliver)}, nil
}

// deliverArgs is Deliver's args.
type deliverArgs struct {
	EventID string `arg:"eventId"`
}

type poster struct {
	url    string
	client *http.Client
}

// deliver POSTs the event. A 2xx is done; a 4xx other than 408 and 429 is
// the receiver refusing the event for good (permanent: the dead-letter
// queue, not more retries); anything else, a transport error included, is
// retried with back-off.
func (p poster) deliver(ctx context.Context, job runner.Job, a deliverArgs) error {
	body, err := json.Marshal(Event{EventID: a.EventID, JobID: job.Envelope.MessageID, Type: job.Envelope.Type})
	if err != nil {
		return engine.Permanent(fmt.Errorf("webhook: encode the event: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return engine.Permanent(fmt.Errorf("webhook: the request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, job.Envelope.MessageID)
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: post: %w", err)
	}
	resp.Body.Close()
	if Permanent(resp.StatusCode) {
		return engine.Permanent(fmt.Errorf("webhook: the receiver refused the event: HTTP %d", resp.StatusCode))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook: the receiver answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// Permanent reports whether a receiver's status refuses an event for good:
// a 4xx other than 408 (Request Timeout) and 429 (Too Many Requests).
func Permanent(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}
