//go:build integration

package marker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/marker"
)

// TestResetFailed: only a marker in state FAILED is deleted; a done or leased
// marker, or none, is left as it is, without an error.
func TestResetFailed(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	d := dynamostore.New(client, table)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Unix()
	failed := engine.Key{Type: "test.claim-first.v1", JobID: "job-failed"}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		dynamostore.AttrHandler:    &types.AttributeValueMemberS{Value: dynamostore.PartitionKey(failed)},
		dynamostore.AttrMessageKey: &types.AttributeValueMemberS{Value: failed.JobID},
		dynamostore.AttrState:      &types.AttributeValueMemberS{Value: "FAILED"},
		dynamostore.AttrExpiresAt:  &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)},
	}}); err != nil {
		t.Fatal(err)
	}
	done := engine.Key{Type: "test.claim-first.v1", JobID: "job-done"}
	if _, err := d.Claim(ctx, done, engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	leased := engine.Key{Type: "test.claim-first.v1", JobID: "job-leased"}
	if _, err := d.Lease(ctx, leased, engine.Mark{Owner: "worker-1", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	none := engine.Key{Type: "test.claim-first.v1", JobID: "job-none"}

	for range 2 { // twice: the second run finds nothing to do
		for _, k := range []engine.Key{failed, done, leased, none} {
			if err := marker.NewResetter(client, table).ResetFailed(ctx, k); err != nil {
				t.Fatalf("ResetFailed(%s): %v", k.JobID, err)
			}
		}
	}
	if _, ok, err := d.Peek(ctx, failed); err != nil || ok {
		t.Fatalf("FAILED marker still there (%v, %v)", ok, err)
	}
	if m, ok, err := d.Peek(ctx, done); err != nil || !ok || !m.Processed() {
		t.Fatalf("done marker %+v %v %v; a done effect must never be reset", m, ok, err)
	}
	if m, ok, err := d.Peek(ctx, leased); err != nil || !ok || m.Owner != "worker-1" {
		t.Fatalf("leased marker %+v %v %v; want it untouched", m, ok, err)
	}
}
