package marker

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/ddb"
)

// ResetFailed deletes k's marker if, and only if, it records a failed effect
// (state FAILED), so a redriven claim-then-effect job runs its effect again.
// It returns nil when there is no such marker: none at all, or one that is
// leased or done (a done effect is never undone). Running it twice is
// harmless.
func (d *Dynamo) ResetFailed(ctx context.Context, k Key) error {
	expr, err := expression.NewBuilder().WithCondition(
		expression.Name(AttrState).Equal(expression.Value(StateFailed)),
	).Build()
	if err != nil {
		return fmt.Errorf("marker: reset failed: %w", err)
	}
	_, err = d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       KeyAV(k),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err == nil || ddb.IsConditionFailed(err) {
		return nil
	}
	return fmt.Errorf("marker: reset failed %s/%s: %w", k.Handler, k.MessageKey, err)
}
