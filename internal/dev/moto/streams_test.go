//go:build integration

package moto

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// TestCancelledTransactionLeavesNoStreamRecord: DynamoDB writes no stream
// record for a cancelled transaction. With the launcher's rollback neither
// does moto (its own left an INSERT and a REMOVE for an item the
// transaction put before a later operation failed), so an outbox relay
// reading the local stream sees what it would see in AWS.
func TestCancelledTransactionLeavesNoStreamRecord(t *testing.T) {
	s := startMoto(t)
	ctx := context.Background()
	cfg := Config(s.Endpoint, Region)
	db := dynamodb.NewFromConfig(cfg)
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	out, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("outbox"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	})
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, db, "users")
	put := func(table, pk string, cond bool) types.TransactWriteItem {
		p := &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": str(pk)}}
		if cond {
			p.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		return types.TransactWriteItem{Put: p}
	}
	tx := func(items ...types.TransactWriteItem) error {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}
	// One committed transaction: a user and its outbox item.
	if err := tx(put("users", "u-1", true), put("outbox", "p#k-1", true)); err != nil {
		t.Fatal(err)
	}
	// Cancelled: the outbox put comes first, then the user put fails its
	// condition (the user exists). Then one that updates the committed
	// outbox item before failing.
	var canceled *types.TransactionCanceledException
	if err := tx(put("outbox", "p#k-2", true), put("users", "u-1", true)); !errors.As(err, &canceled) {
		t.Fatalf("transaction = %v; want it cancelled", err)
	}
	if err := tx(put("outbox", "p#k-1", false), put("users", "u-1", true)); !errors.As(err, &canceled) {
		t.Fatalf("transaction = %v; want it cancelled", err)
	}

	streams := dynamodbstreams.NewFromConfig(cfg)
	desc, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: out.TableDescription.LatestStreamArn})
	if err != nil || len(desc.StreamDescription.Shards) == 0 {
		t.Fatalf("describe stream: %v", err)
	}
	it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: out.TableDescription.LatestStreamArn, ShardId: desc.StreamDescription.Shards[0].ShardId,
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs.Records {
		pk, _ := r.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS)
		got = append(got, string(r.EventName)+" "+pk.Value)
	}
	if len(got) != 1 || got[0] != "INSERT p#k-1" {
		t.Fatalf("stream records %v; want only the committed transaction's INSERT p#k-1", got)
	}
	// The next write after them still gets a record, in order.
	if err := tx(put("outbox", "p#k-3", true)); err != nil {
		t.Fatal(err)
	}
	recs, err = streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: recs.NextShardIterator})
	if err != nil || len(recs.Records) != 1 || string(recs.Records[0].EventName) != "INSERT" {
		t.Fatalf("records after the cancelled ones: %v, %v; want one INSERT", recs, err)
	}
}
