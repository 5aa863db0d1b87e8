package client_test

import (
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/client"
)

// A signup that enqueues its verification mail inside its own transaction:
// the user's Put and the job's outbox Put commit together, or neither does.
// Here the transaction is only built and printed; a producer passes it to
// its DynamoDB client's TransactWriteItems.
func ExampleOutboxPut() {
	userPut := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String("app-users"),
		Item: map[string]types.AttributeValue{
			"userId": &types.AttributeValueMemberS{Value: "u-123"},
			"email":  &types.AttributeValueMemberS{Value: "ana@example.com"},
		},
		ConditionExpression: aws.String("attribute_not_exists(userId)"),
	}}
	jobPut, jobID, err := client.OutboxPut("runstwice-prod-outbox", client.OutboxJob{
		Producer:       "signup",
		IdempotencyKey: "signup-u-123",
		Type:           client.TypePartnerVerification,
		Args:           client.PartnerVerificationArgs{UserID: "u-123", RoleCode: "city-partner", CountryCode: "BD"},
	}, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	tx := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{userPut, jobPut}}
	// _, err = db.TransactWriteItems(ctx, tx)

	item := tx.TransactItems[1].Put.Item
	keys := make([]string, 0, len(item))
	for k := range item {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Println("job", jobID)
	fmt.Println("outbox item", item["pk"].(*types.AttributeValueMemberS).Value, keys)

	// An item the relay would refuse is refused here, with the API's rules.
	_, _, err = client.OutboxPut("runstwice-prod-outbox", client.OutboxJob{
		Producer: "signup", IdempotencyKey: "signup-u-124", Type: client.TypeWelcome,
		Args: map[string]string{"userId": "ana@example.com"},
	}, time.Now())
	fmt.Println(err != nil)
	// Output:
	// job 2d6b3c06-90ec-516e-a7ca-ca4af27b3d94
	// outbox item signup#signup-u-123 [args expiresAt idempotencyKey pk producer type]
	// true
}
