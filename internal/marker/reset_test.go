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

	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/marker"
)

// TestResetFailed: only a marker in state FAILED is deleted; a done or leased
// marker, or none, is left as it is, without an error.
func TestResetFailed(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client, "markers", marker.AttrHandler, marker.AttrMessageKey)
	d := marker.NewDynamo(client, table)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Unix()
	failed := marker.Key{Handler: "test.claim-first.v1", MessageKey: "job-failed"}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		marker.AttrHandler:    &types.AttributeValueMemberS{Value: marker.PartitionKey(failed)},
		marker.AttrMessageKey: &types.AttributeValueMemberS{Value: failed.MessageKey},
		marker.AttrState:      &types.AttributeValueMemberS{Value: "FAILED"},
		marker.AttrExpiresAt:  &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)},
	}}); err != nil {
		t.Fatal(err)
	}
	done := marker.Key{Handler: "test.claim-first.v1", MessageKey: "job-done"}
	if _, err := d.Claim(ctx, done, "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	leased := marker.Key{Handler: "test.claim-first.v1", MessageKey: "job-leased"}
	if _, err := d.Lease(ctx, leased, "worker-1", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	none := marker.Key{Handler: "test.claim-first.v1", MessageKey: "job-none"}

	for range 2 { // twice: the second run finds nothing to do
		for _, k := range []marker.Key{failed, done, leased, none} {
			if err := d.ResetFailed(ctx, k); err != nil {
				t.Fatalf("ResetFailed(%s): %v", k.MessageKey, err)
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
