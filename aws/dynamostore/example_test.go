package dynamostore_test

import (
	"context"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/internal/runner"
)

// A function's markers live in a table of its own; the store goes into the
// runner's Config as its Markers. Settled markers live for Retention (the
// engine's default when it is left zero): set it longer than a job can be
// delivered again.
func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	markers := dynamostore.New(dynamodb.NewFromConfig(cfg), "my-function-markers")
	markers.Retention = 30 * 24 * time.Hour
	_ = runner.Config{Markers: markers}
}
