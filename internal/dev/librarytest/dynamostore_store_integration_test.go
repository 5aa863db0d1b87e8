//go:build integration

package librarytest_test

import (
	"context"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestDynamoPeekBatchIsOneCall checks the cost rule: the peeks of a whole SQS
// batch are one BatchGetItem.
func TestDynamoPeekBatchIsOneCall(t *testing.T) {
	counter := testenv.NewCallCounter()
	client := testenv.DynamoDB(t, counter.Option)
	table := testenv.NewTable(t, client, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	d := dynamostore.New(client, table)
	ctx := context.Background()
	keys := make([]engine.Key, 10)
	for i := range keys {
		keys[i] = engine.Key{Type: "email.welcome.v1", JobID: testenv.Name(t, "m")}
	}
	for _, k := range keys[:4] {
		if _, err := d.Claim(ctx, k, engine.Mark{}); err != nil {
			t.Fatal(err)
		}
	}
	counter.Reset()
	got, err := d.PeekBatch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("found %d claimed; want 4", len(got))
	}
	if n := counter.Get("DynamoDB.BatchGetItem"); n != 1 || counter.Get("DynamoDB.GetItem") != 0 {
		t.Fatalf("calls for a 10-key peek: %s; want one BatchGetItem", counter)
	}
	t.Logf("AWS calls for PeekBatch of 10 keys: %s", counter)
}

// TestDynamoStoresOnePartitionPerJob reads the table itself: the markers of
// two jobs of one type are in two partitions, "<type>#<job id>", each with
// the job id as its range key.
func TestDynamoStoresOnePartitionPerJob(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	d := dynamostore.New(client, table)
	ctx := context.Background()
	want := map[string]string{}
	for _, id := range []string{"job-1", "job-2"} {
		k := engine.Key{Type: "email.welcome.v1", JobID: id}
		if _, err := d.Claim(ctx, k, engine.Mark{}); err != nil {
			t.Fatal(err)
		}
		want["email.welcome.v1#"+id] = id
	}
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range out.Items {
		got[it[dynamostore.AttrHandler].(*types.AttributeValueMemberS).Value] = it[dynamostore.AttrMessageKey].(*types.AttributeValueMemberS).Value
	}
	if !maps.Equal(got, want) {
		t.Fatalf("stored keys (hash → range) %v; want %v", got, want)
	}
}
