// Package sweepindex pages the jobs table's sparse index sweep (hash key
// sweep, range key pk, keys only; template.yaml): the ids the continuation
// sweep and the schedule sweep must look at, each the key of an item of
// its own (a parent's continuations item, a job's schedule-sweep entry)
// that carries the attribute sweep while it is listed. The index takes the
// place of the one list item each sweep had, so no item or partition key
// is written by every continuation or cancel (docs/scale.md). Only the
// functions that run a sweep link it (the chain function, the e-mail
// function); their roles are granted Query on that index alone.
package sweepindex

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/jobs"
)

// Name is the jobs table's index of what the sweeps must look at.
const Name = "sweep"

// QueryAPI is the part of the DynamoDB client an Index uses. Like every
// store, it declares its own SDK methods on purpose: the template's IAM
// test derives each function's actions from these interfaces.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Index is the index sweep of one jobs table; it is a jobs.SweepIndex.
type Index struct {
	client QueryAPI
	table  string
}

// New returns the index sweep of table.
func New(client QueryAPI, table string) *Index { return &Index{client: client, table: table} }

// Page returns the table keys (pk) listed in shard, in order: those after
// after (from the first when empty) and not after through (to the last when
// empty), at most limit of them; more reports that others follow. The index
// is eventually consistent: a key listed a moment ago may be missing, one
// taken off a moment ago still there.
func (x *Index) Page(ctx context.Context, shard, after, through string, limit int) (keys []string, more bool, err error) {
	cond := expression.Key(jobs.AttrSweep).Equal(expression.Value(shard))
	if through != "" {
		cond = cond.And(expression.Key(jobs.AttrPK).LessThanEqual(expression.Value(through)))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(cond).Build()
	if err != nil {
		return nil, false, fmt.Errorf("sweepindex: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(x.table), IndexName: aws.String(Name), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), Limit: aws.Int32(int32(limit)),
	}
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			jobs.AttrSweep: &types.AttributeValueMemberS{Value: shard}, jobs.AttrPK: &types.AttributeValueMemberS{Value: after},
		}
	}
	out, err := x.client.Query(ctx, in)
	if err != nil {
		return nil, false, fmt.Errorf("sweepindex: %s %s: %w", x.table, shard, err)
	}
	for _, item := range out.Items {
		if pk, ok := item[jobs.AttrPK].(*types.AttributeValueMemberS); ok {
			keys = append(keys, pk.Value)
		}
	}
	return keys, len(out.LastEvaluatedKey) > 0, nil
}
