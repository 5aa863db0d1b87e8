//go:build integration

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/examples/internal/exampletest"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
)

// TestChargesOnceUnderTheEmulator builds the example's bootstrap and runs
// it under aws-lambda-rie against moto (its markers table). Its event,
// invoked twice, charges the card once: both answers are 201 with the
// same charge, the second marked Idempotent-Replayed: true. The other
// event (the same caller and key, another amount) is 422 problem+json, and
// the provider is never asked again.
func TestChargesOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newProvider(t)
	em := startCharge(ctx, t, p.URL)

	first := invoke(ctx, t, em, "charge.json")
	if first.StatusCode != http.StatusCreated || first.Headers["Idempotent-Replayed"] != "" {
		t.Fatalf("the first answer is %d %v %s; want 201, not replayed", first.StatusCode, first.Headers, first.Body)
	}
	var c Charge
	if err := json.Unmarshal([]byte(first.Body), &c); err != nil || c != (Charge{ID: "ch_1", Status: StatusSucceeded, Amount: 1299, Currency: "EUR"}) {
		t.Fatalf("the first answer's body is %s (%v); want the charge ch_1 of 1299 EUR", first.Body, err)
	}
	again := invoke(ctx, t, em, "charge.json")
	if again.StatusCode != http.StatusCreated || again.Body != first.Body || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("the repeat is %d %v %s; want the first answer, replayed", again.StatusCode, again.Headers, again.Body)
	}
	other := invoke(ctx, t, em, "charge-other-body.json")
	var prob struct{ Type string }
	if err := json.Unmarshal([]byte(other.Body), &prob); err != nil || other.StatusCode != http.StatusUnprocessableEntity ||
		other.Headers["Content-Type"] != "application/problem+json" || prob.Type != "urn:charge:idempotency-key-reused" {
		t.Fatalf("another body under the key is %d %v %s; want 422, the key reused", other.StatusCode, other.Headers, other.Body)
	}
	if charges, posts := p.made(); charges != 1 || posts != 1 {
		t.Fatalf("the provider made %d charges from %d POSTs; want one of one", charges, posts)
	}
}

// startCharge builds the example's bootstrap and starts it under
// aws-lambda-rie against moto, charging at paymentsURL, with a markers
// table of its own.
func startCharge(ctx context.Context, t *testing.T, paymentsURL string) *lambdarie.Emulator {
	t.Helper()
	return exampletest.Start(ctx, t, exampletest.Function{Example: "charge", Timeout: 10 * time.Second, Env: map[string]string{
		"PAYMENTS_URL": paymentsURL, "MARKERS_TABLE": exampletest.Markers(t, "charge"),
	}})
}

// invoke invokes the function with events/file and returns its answer.
func invoke(ctx context.Context, t *testing.T, em *lambdarie.Emulator, file string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out := exampletest.Invoke(ctx, t, em, exampletest.ReadEvent(t, file))
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		t.Fatalf("invoke %s answered %s (%v); want an HTTP answer", file, out, err)
	}
	return resp
}
