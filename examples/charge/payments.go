package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errProvider is matched by every error Payments.Charge returns: the
// provider did not say whether it charged (unreachable, a 5xx, an answer
// it should not give). Nothing is kept, and the client's retry with the
// same Idempotency-Key asks the provider again, under the same key.
var errProvider = errors.New("charge: the payment provider did not answer")

// Payments charges cards at the payment provider at URL.
type Payments struct {
	URL    string
	Client *http.Client
}

// providerRequest is what the provider is sent.
type providerRequest struct {
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Card        string `json:"card"`
	Description string `json:"description,omitempty"`
}

// Charge asks the provider to charge r, with key as the provider's own
// Idempotency-Key: a charge repeated after a crash between the provider's
// answer and the kept result is one charge there. A 2xx is a charge (its
// id from the answer), a 402 a decline (its code from the answer): both
// are results, kept and replayed. Anything else is an errProvider error.
func (p Payments) Charge(ctx context.Context, key string, r Request) (Charge, error) {
	body, err := json.Marshal(providerRequest(r))
	if err != nil {
		return Charge{}, fmt.Errorf("%w: %w", errProvider, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return Charge{}, fmt.Errorf("%w: %w", errProvider, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.Client.Do(req)
	if err != nil {
		return Charge{}, fmt.Errorf("%w: %w", errProvider, err)
	}
	defer resp.Body.Close()
	var answer struct {
		ID   string `json:"id"`
		Code string `json:"code"`
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, 64<<10))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if err := dec.Decode(&answer); err != nil || answer.ID == "" {
			return Charge{}, fmt.Errorf("%w: HTTP %d without a charge id (%v)", errProvider, code, err)
		}
		return Charge{ID: answer.ID, Status: StatusSucceeded, Amount: r.Amount, Currency: r.Currency}, nil
	case code == http.StatusPaymentRequired:
		_ = dec.Decode(&answer) // a decline without a code is still a decline
		return Charge{Status: StatusDeclined, DeclineCode: answer.Code, Amount: r.Amount, Currency: r.Currency}, nil
	default:
		return Charge{}, fmt.Errorf("%w: HTTP %d", errProvider, code)
	}
}
