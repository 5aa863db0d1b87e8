// Command orders is an example of a whole Lambda function on the engine,
// outside the bundle, on a team's own SQS messages: each message is an
// order ({"orderId":"o-1","amount":5}, no envelope), and each order ships
// once, however often its message is delivered or sent.
//
// The engine keeps the guard around the shipment: a marker per order id
// in DynamoDB (peeked for the whole batch in one read, claimed after the
// shipment), a lease against a twin in flight, the order's fingerprint
// (the same order id with another amount is dead-lettered with the
// reason, never shipped), dead letters and the back-off of retries. A
// batch answers with its failed records only (ReportBatchItemFailures).
//
// main only wires: the kind and the shipment are in order.go. It imports
// only the module's public packages. Its template (template.yaml) deploys
// it with its queue, dead-letter queue and markers table.
//
// Environment: SHIP_URL (the shipping service), MARKERS_TABLE, QUEUE_URL
// and DLQ_URL.
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
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
)

func main() {
	h, err := build(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(h.HandleSQS)
}

// environment names the variables the function reads; each is required.
var environment = []string{"SHIP_URL", "MARKERS_TABLE", "QUEUE_URL", "DLQ_URL"}

// build wires the handler from the environment.
func build(ctx context.Context) (*engine.Handler[Order], error) {
	env, err := lookup(environment...)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("orders: aws config: %w", err)
	}
	client := sqs.NewFromConfig(cfg)
	urls := map[string]string{"orders": env["QUEUE_URL"]}
	shipper := Shipper{URL: env["SHIP_URL"], Client: &http.Client{Timeout: 10 * time.Second}}
	return engine.NewHandler(Ship, shipper.Ship, engine.Options{
		Store:        dynamostore.New(dynamodb.NewFromConfig(cfg), env["MARKERS_TABLE"]),
		DeadLetterer: sqsqueue.New(client, urls, env["DLQ_URL"]),
		Backoff:      sqsqueue.NewVisibility(client, urls),
		Logger:       engine.NewLogger(os.Stdout, "info"),
		Metrics:      engine.DefaultMetrics("orders-example"),
	})
}

// lookup returns the environment variables names, or an error naming
// those that are unset.
func lookup(names ...string) (map[string]string, error) {
	env := make(map[string]string, len(names))
	var missing []error
	for _, n := range names {
		if env[n] = os.Getenv(n); env[n] == "" {
			missing = append(missing, fmt.Errorf("orders: %s is not set", n))
		}
	}
	return env, errors.Join(missing...)
}
