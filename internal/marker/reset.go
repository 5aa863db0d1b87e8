package marker

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/ddb"
)

// Deleter is the part of the DynamoDB client ResetFailed uses.
type Deleter interface {
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Resetter resets failed markers on one markers table (the table
// dynamostore.Store reads and writes).
type Resetter struct {
	client Deleter
	table  string
}

// NewResetter returns the resetter of the markers on table.
func NewResetter(client Deleter, table string) *Resetter {
	return &Resetter{client: client, table: table}
}

// ResetFailed deletes k's marker if, and only if, it records a failed effect
// (state FAILED), so a redriven claim-then-effect job runs its effect again.
// It returns nil when there is no such marker: none at all, or one that is
// leased or done (a done effect is never undone). Running it twice is
// harmless.
func (r *Resetter) ResetFailed(ctx context.Context, k engine.Key) error {
	expr, err := expression.NewBuilder().WithCondition(
		expression.Name(dynamostore.AttrState).Equal(expression.Value(engine.StateFailed)),
	).Build()
	if err != nil {
		return fmt.Errorf("marker: reset failed: %w", err)
	}
	_, err = r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(r.table),
		Key:                       dynamostore.KeyAV(k),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err == nil || ddb.IsConditionFailed(err) {
		return nil
	}
	return fmt.Errorf("marker: reset failed %s/%s: %w", k.Type, k.JobID, err)
}
