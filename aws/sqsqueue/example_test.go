package sqsqueue_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// One sender parks and dead-letters for the runner; the visibility back-off
// postpones its transient retries. The work queues are named by the
// engine's queue names, as the job types declare them.
func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	urls := map[engine.Queue]string{
		contract.QueueDefault: "https://sqs.eu-west-1.amazonaws.com/123456789012/my-jobs",
	}
	queues := sqsqueue.New(client, urls, "https://sqs.eu-west-1.amazonaws.com/123456789012/my-jobs-dlq")
	_ = engine.Config{Parker: queues, DeadLetterer: queues, Backoff: sqsqueue.NewVisibility(client, urls)}
}
