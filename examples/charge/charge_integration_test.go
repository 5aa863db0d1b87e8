//go:build integration

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/testenv"
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
	moto := testenv.Moto(t)
	table := testenv.NewTable(t, testenv.DynamoDB(t), "charge-markers", "HandlerName", "MessageKey")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := lambdarie.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := lambdarie.Build(ctx, root, "examples/charge", filepath.Join(t.TempDir(), "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{
		RIE: rie, Bootstrap: bin, FunctionName: "charge", Timeout: 10 * time.Second, Output: testWriter{t},
		Env: map[string]string{
			"PAYMENTS_URL": paymentsURL, "MARKERS_TABLE": table,
			"AWS_ENDPOINT_URL": moto.Endpoint, "AWS_REGION": testenv.Region,
			"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Stop)
	return em
}

// invoke invokes the function with events/file and returns its answer.
func invoke(ctx context.Context, t *testing.T, em *lambdarie.Emulator, file string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	event, err := os.ReadFile(filepath.Join("events", file))
	if err != nil {
		t.Fatal(err)
	}
	out, err := em.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("invoke %s: %v", file, err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		t.Fatalf("invoke %s answered %s (%v); want an HTTP answer", file, out, err)
	}
	return resp
}

// testWriter logs the emulator's output through t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
