//go:build integration

package librarytest_test

import (
	"testing"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestDynamoConformance: the DynamoDB store passes the suite every
// engine.Store must pass, on moto, one table for the whole suite.
func TestDynamoConformance(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client, "markers", "HandlerName", "MessageKey")
	enginetest.RunStore(t, func(t *testing.T, clock *enginetest.Clock) engine.Store {
		d := dynamostore.New(client, table)
		d.Now = clock.Now
		return d
	})
}
