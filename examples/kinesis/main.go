// Command kinesis is an example of a Lambda function on the engine that
// consumes a Kinesis data stream of its team's own JSON records: each
// record is a purchase ({"purchaseId":"p-1","customerId":"c-7",
// "amount":12}), and each purchase credits its customer's loyalty points
// once, however often it is put or replayed.
//
// The engine runs a shard's records in order and stops the shard at the
// first that fails: the response (ReportBatchItemFailures) names that
// record's sequence number, Lambda checkpoints before it and retries from
// it, and the records after it wait. A record whose key is done (a
// producer's duplicate, a replay from an older checkpoint) is dropped
// without a call. A record that can never succeed (not a purchase, or its
// id reused with another amount) goes to the dead-letter queue with its
// reason and the shard goes on; the same queue is the event source
// mapping's on-failure destination, for a batch Lambda gives up on.
//
// main only wires: the kind and the credit are in points.go. It imports
// only the module's public packages. Its template (template.yaml) deploys
// it with its stream, dead-letter queue and markers table.
//
// Environment: POINTS_URL (the loyalty points service), MARKERS_TABLE and
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
	lambda.Start(h.HandleKinesis)
}

// environment names the variables the function reads; each is required.
var environment = []string{"POINTS_URL", "MARKERS_TABLE", "DLQ_URL"}

// build wires the handler from the environment. A stream record is never
// parked or postponed (it holds its shard instead), so the SQS sender is
// the dead-letterer alone, with no work queues.
func build(ctx context.Context) (*engine.Handler[Purchase], error) {
	env, err := lookup(environment...)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("kinesis: aws config: %w", err)
	}
	points := Points{URL: env["POINTS_URL"], Client: &http.Client{Timeout: 10 * time.Second}}
	return engine.NewHandler(Credit, points.Credit, engine.Options{
		Store:        dynamostore.New(dynamodb.NewFromConfig(cfg), env["MARKERS_TABLE"]),
		DeadLetterer: sqsqueue.New(sqs.NewFromConfig(cfg), nil, env["DLQ_URL"]),
		Logger:       engine.NewLogger(os.Stdout, "info"),
		Metrics:      engine.DefaultMetrics("kinesis-example"),
	})
}

// lookup returns the environment variables names, or an error naming
// those that are unset.
func lookup(names ...string) (map[string]string, error) {
	env := make(map[string]string, len(names))
	var missing []error
	for _, n := range names {
		if env[n] = os.Getenv(n); env[n] == "" {
			missing = append(missing, fmt.Errorf("kinesis: %s is not set", n))
		}
	}
	return env, errors.Join(missing...)
}
