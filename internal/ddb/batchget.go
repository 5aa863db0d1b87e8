package ddb

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithytime "github.com/aws/smithy-go/time"
)

// MaxBatchGet is DynamoDB's limit of keys per BatchGetItem.
const MaxBatchGet = 100

// maxBatchGetCalls bounds the calls for one 100 keys: DynamoDB may leave
// keys unprocessed under throttling, and they are asked for again.
const maxBatchGetCalls = 8

// BatchGetFunc is a DynamoDB client's BatchGetItem. The caller passes its
// own client's method value, so its client interface still declares every
// SDK call it makes (the template's IAM test reads those interfaces).
type BatchGetFunc func(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)

// BatchGet reads keys of table with consistent reads, MaxBatchGet keys a
// call, asking again with back-off for what DynamoDB left unprocessed, and
// hands every item it reads to each; an error of each stops it. The keys
// must be distinct (BatchGetItem refuses a key twice). projection, when not
// empty, is the reads' ProjectionExpression.
func BatchGet(ctx context.Context, get BatchGetFunc, table string, keys []map[string]types.AttributeValue, projection string, each func(map[string]types.AttributeValue) error) error {
	for chunk := range slices.Chunk(keys, MaxBatchGet) {
		ka := types.KeysAndAttributes{Keys: chunk, ConsistentRead: aws.Bool(true)}
		if projection != "" {
			ka.ProjectionExpression = aws.String(projection)
		}
		req := map[string]types.KeysAndAttributes{table: ka}
		for call := 0; len(req) > 0; call++ {
			if call == maxBatchGetCalls {
				return fmt.Errorf("batch get: keys still unprocessed after %d calls", call)
			}
			if call > 0 {
				if err := smithytime.SleepWithContext(ctx, batchBackoff(call)); err != nil {
					return fmt.Errorf("batch get: %w", err)
				}
			}
			out, err := get(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return fmt.Errorf("batch get: %w", err)
			}
			for _, item := range out.Responses[table] {
				if err := each(item); err != nil {
					return err
				}
			}
			req = out.UnprocessedKeys
		}
	}
	return nil
}

// batchBackoff is the wait before the call-th call for unprocessed keys:
// 20 ms doubling, at most a second.
func batchBackoff(call int) time.Duration {
	return min(time.Duration(1<<call)*10*time.Millisecond, time.Second)
}
