// Command charge is an example of an API Gateway HTTP API function on the
// engine: POST /charges charges a card once per caller and
// Idempotency-Key, however often the client retries, and answers a retry
// with the first answer, marked Idempotent-Replayed: true.
//
// The guard is engine.Do: the charge runs under a lease on the caller's
// key in the markers table, its result (the charge, or the decline) is
// kept with the key for a day, and the body's fingerprint with it, so a
// retry with another body under the same key is refused (422) and a retry
// while the first is still charging is told to come back (409 with
// Retry-After). The provider is sent a key of its own, derived from the
// caller's, so a charge repeated after a crash between the provider's
// answer and the kept result is still one charge at the provider.
//
// The function handles the HTTP API's events (payload format 2.0)
// directly: no net/http adapter, no dependency beyond the engine and
// aws-lambda-go. Callers sign their requests (the route's IAM
// authorizer), and each caller's keys are its own.
//
// main only wires: the handler is in charge.go, the provider's client in
// payments.go. It imports only the module's public packages. Its template
// (template.yaml) deploys it with its HTTP API and markers table.
//
// Environment: PAYMENTS_URL (the payment provider) and MARKERS_TABLE.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
)

func main() {
	api, err := build(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(api.Handle)
}

// environment names the variables the function reads; each is required.
var environment = []string{"PAYMENTS_URL", "MARKERS_TABLE"}

// build wires the API from the environment.
func build(ctx context.Context) (*API, error) {
	env, err := lookup(environment...)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("charge: aws config: %w", err)
	}
	return &API{
		Store:    dynamostore.New(dynamodb.NewFromConfig(cfg), env["MARKERS_TABLE"]),
		Payments: Payments{URL: env["PAYMENTS_URL"], Client: &http.Client{Timeout: 8 * time.Second}},
		Logger:   engine.NewLogger(os.Stdout, "info"),
	}, nil
}

// lookup returns the environment variables names, or an error naming
// those that are unset.
func lookup(names ...string) (map[string]string, error) {
	env := make(map[string]string, len(names))
	var missing []error
	for _, n := range names {
		if env[n] = os.Getenv(n); env[n] == "" {
			missing = append(missing, fmt.Errorf("charge: %s is not set", n))
		}
	}
	return env, errors.Join(missing...)
}
