package dynamostore_test

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
)

// A function's markers live in a table of its own; the store goes into the
// handler's Options as its Store. How long a done marker guards its key is
// the handler's Retention; the store's own Retention is for what it writes
// without one (a tombstone).
func ExampleNew() {
	// In a function: cfg, err := config.LoadDefaultConfig(ctx).
	cfg := aws.Config{Region: "eu-west-1"}
	markers := dynamostore.New(dynamodb.NewFromConfig(cfg), "my-function-markers")
	_ = engine.Options{Store: markers, Retention: 30 * 24 * time.Hour}
}
