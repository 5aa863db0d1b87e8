package scalemodel

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/jobs"
)

// sweepOf is an item's partition key of the index sweep ("" for none).
func sweepOf(it item) string {
	if s, ok := it[jobs.AttrSweep].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// indexChange is the partition keys of the index a write changes.
func indexChange(old, new item) []string {
	a, b := sweepOf(old), sweepOf(new)
	switch {
	case a == b:
		return nil
	case a == "":
		return []string{b}
	case b == "":
		return []string{a}
	}
	return []string{a, b}
}

// index keeps the index sweep of pk as the write old → new leaves it.
func (d *DB) index(pk string, old, new item) {
	if a := sweepOf(old); a != "" {
		delete(d.shards[a], pk)
	}
	if b := sweepOf(new); b != "" {
		if d.shards[b] == nil {
			d.shards[b] = map[string]bool{}
		}
		d.shards[b][pk] = true
	}
}

// Query pages the index sweep: the key condition names one shard (and may
// bound pk from above), the start key is exclusive.
func (d *DB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	d.call()
	if aws.ToString(in.IndexName) != "sweep" {
		return nil, validation(fmt.Errorf("the model simulates the index sweep alone, not %q", aws.ToString(in.IndexName)))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var shard string
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*types.AttributeValueMemberS); ok && d.shards[s.Value] != nil {
			shard = s.Value
		}
	}
	pks := slices.Sorted(func(yield func(string) bool) {
		for pk := range d.shards[shard] {
			if !yield(pk) {
				return
			}
		}
	})
	if start, ok := in.ExclusiveStartKey[jobs.AttrPK].(*types.AttributeValueMemberS); ok {
		i, found := slices.BinarySearch(pks, start.Value)
		if found {
			i++
		}
		pks = pks[i:]
	}
	out := &dynamodb.QueryOutput{}
	limit := int(aws.ToInt32(in.Limit))
	e := env{in.ExpressionAttributeNames, in.ExpressionAttributeValues}
	for i, pk := range pks {
		keys := item{jobs.AttrPK: &types.AttributeValueMemberS{Value: pk}, jobs.AttrSweep: &types.AttributeValueMemberS{Value: shard}}
		ok, err := condition(aws.ToString(in.KeyConditionExpression), e, keys)
		if err != nil {
			return nil, validation(err)
		}
		if !ok {
			if strings.Contains(aws.ToString(in.KeyConditionExpression), "<=") {
				break // past the upper bound: the rest is too
			}
			continue
		}
		out.Items = append(out.Items, keys)
		if limit > 0 && len(out.Items) == limit && i+1 < len(pks) {
			out.LastEvaluatedKey = keys
			break
		}
	}
	return out, nil
}
