package sqsqueue_test

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
)

// One sender parks and dead-letters for a handler; the visibility back-off
// postpones its transient retries. A park goes back to the queue the record
// came from, so the sender is given that queue's URL.
func ExampleNew() {
	// In a function: cfg, err := config.LoadDefaultConfig(ctx).
	cfg := aws.Config{Region: "eu-west-1"}
	client := sqs.NewFromConfig(cfg)
	urls := map[string]string{
		"orders": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
	}
	queues := sqsqueue.New(client, urls, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders-dlq")
	_ = engine.Options{Parker: queues, DeadLetterer: queues, Backoff: sqsqueue.NewVisibility(client, urls)}
}
