// Command dynamodbstreams is an example of a Lambda function on the
// engine that consumes a DynamoDB table's stream: each order put in the
// team's orders table gets one confirmation, however often the stream's
// records of it are delivered or replayed.
//
// The engine hands Decode each record's image as plain JSON (the new
// image, or the old one for a REMOVE), so the kind reads an order as the
// table holds it. It runs a shard's records in order and stops the shard
// at the first that fails: the response (ReportBatchItemFailures) names
// that record's sequence number, Lambda retries from it, and the records
// after it wait. A record whose order is confirmed (its MODIFY, its
// REMOVE, a replay) is dropped without a call. A record that can never
// succeed goes to the dead-letter queue with its reason and the shard goes
// on; the same queue is the event source mapping's on-failure
// destination, for a batch Lambda gives up on.
//
// main only wires: the kind and the confirmation are in confirm.go. It
// imports only the module's public packages. Its template (template.yaml)
// deploys it with the orders table and its stream, the dead-letter queue
// and the markers table.
//
// Environment: CONFIRM_URL (the notification service), MARKERS_TABLE and
// DLQ_URL.
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
	lambda.Start(h.HandleDynamoDB)
}

// environment names the variables the function reads; each is required.
var environment = []string{"CONFIRM_URL", "MARKERS_TABLE", "DLQ_URL"}

// build wires the handler from the environment. A stream record is never
// parked or postponed (it holds its shard instead), so the SQS sender is
// the dead-letterer alone, with no work queues.
func build(ctx context.Context) (*engine.Handler[Order], error) {
	env, err := lookup(environment...)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("dynamodbstreams: aws config: %w", err)
	}
	confirmer := Confirmer{URL: env["CONFIRM_URL"], Client: &http.Client{Timeout: 10 * time.Second}}
	return engine.NewHandler(Confirm, confirmer.Confirm, engine.Options{
		Store:        dynamostore.New(dynamodb.NewFromConfig(cfg), env["MARKERS_TABLE"]),
		DeadLetterer: sqsqueue.New(sqs.NewFromConfig(cfg), nil, env["DLQ_URL"]),
		Logger:       engine.NewLogger(os.Stdout, "info"),
		Metrics:      engine.DefaultMetrics("dynamodbstreams-example"),
	})
}

// lookup returns the environment variables names, or an error naming
// those that are unset.
func lookup(names ...string) (map[string]string, error) {
	env := make(map[string]string, len(names))
	var missing []error
	for _, n := range names {
		if env[n] = os.Getenv(n); env[n] == "" {
			missing = append(missing, fmt.Errorf("dynamodbstreams: %s is not set", n))
		}
	}
	return env, errors.Join(missing...)
}
