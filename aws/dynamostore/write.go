package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// conditionFailed reports whether err is a failed condition, and returns
// the item that failed it when the service sent it back.
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// absentOrExpired holds when the table has no live item under the key: none
// at all, or one past its expiresAt (TTL deletion can lag by days).
func absentOrExpired(now time.Time) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(AttrHandler)).
		Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix())))
}

// putIf is a PutItem of item under cond that returns the old item when the
// condition fails.
func (d *Store) putIf(item any, cond expression.ConditionBuilder) (*dynamodb.PutItemInput, error) {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("condition: %w", err)
	}
	return &dynamodb.PutItemInput{
		TableName: aws.String(d.table), Item: av, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// live reports whether item exists and is not past its expiresAt at now.
func live(item map[string]types.AttributeValue, now time.Time) bool {
	if len(item) == 0 {
		return false
	}
	n, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return true
	}
	at, err := strconv.ParseInt(n.Value, 10, 64)
	return err != nil || at <= 0 || at > now.Unix()
}

// maxBatchGet is how many keys one BatchGetItem reads, and maxGetCalls how
// often a chunk is asked for while DynamoDB leaves keys unprocessed
// (throttled) before the read fails.
const (
	maxBatchGet = 100
	maxGetCalls = 8
)

// batchGet reads keys with consistent reads, a BatchGetItem per hundred,
// asking again for what DynamoDB left unprocessed after a growing pause,
// and calls each for every item found.
func (d *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, each func(map[string]types.AttributeValue) error) error {
	for chunk := range slices.Chunk(keys, maxBatchGet) {
		req := map[string]types.KeysAndAttributes{d.table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for call := 0; len(req) > 0; call++ {
			if call == maxGetCalls {
				return fmt.Errorf("batch get: keys still unprocessed after %d calls", call)
			}
			if call > 0 {
				pause := time.NewTimer(min(time.Duration(1<<call)*10*time.Millisecond, time.Second))
				select {
				case <-ctx.Done():
					pause.Stop()
					return fmt.Errorf("batch get: %w", ctx.Err())
				case <-pause.C:
				}
			}
			out, err := d.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return fmt.Errorf("batch get: %w", err)
			}
			for _, item := range out.Responses[d.table] {
				if err := each(item); err != nil {
					return err
				}
			}
			req = out.UnprocessedKeys
		}
	}
	return nil
}
