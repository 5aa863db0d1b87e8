// Package ddb is the kit every DynamoDB store in runstwice shares: what a
// failed condition looks like (and the item it failed against), how a read
// honours TTL without trusting TTL deletion, the clock, caller-safe key
// parts, and conditional puts and updates built with the SDK's expression
// builder.
package ddb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/vclock"
)

// IsConditionFailed reports whether err says a write's condition did not
// hold: a ConditionalCheckFailedException, or a TransactionCanceledException
// whose cancellation reasons are all ConditionalCheckFailed (or None, for the
// items of the transaction that did not fail). Anything else, throttling and
// validation errors included, is a real error.
func IsConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	failed := false
	for _, r := range tce.CancellationReasons {
		switch code := deref(r.Code); code {
		case "ConditionalCheckFailed":
			failed = true
		case "None", "":
		default:
			return false
		}
	}
	return failed
}

// OldItem returns the item a failed conditional write returned with
// ReturnValuesOnConditionCheckFailure=ALL_OLD, or nil.
func OldItem(err error) map[string]types.AttributeValue {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item
	}
	return nil
}

// Expired reports whether an item whose TTL attribute holds expiresAt (epoch
// seconds, 0 for none) is past its life at now. DynamoDB may keep expired
// items for days, so reads treat them as absent themselves.
func Expired(expiresAt int64, now time.Time) bool {
	return expiresAt > 0 && expiresAt <= now.Unix()
}

// Epoch returns t as epoch seconds, the unit of DynamoDB TTL attributes.
func Epoch(t time.Time) int64 { return t.Unix() }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AttrExpiresAt is the TTL attribute of every runstwice table (epoch
// seconds).
const AttrExpiresAt = "expiresAt"

// Now returns clock(), or vclock.Now() when clock is nil: the clock every
// store takes as an optional field. vclock.Now is the wall clock except in
// a chaos build, whose campaign moves it forward (internal/vclock).
func Now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return vclock.Now()
}

// DurationOr returns d when it is positive, else def: the optional
// retention and timeout fields every store takes.
func DurationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// KeyS returns a key of one string attribute.
func KeyS(name, value string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{name: &types.AttributeValueMemberS{Value: value}}
}

// EscapeKeyPart percent-encodes '%' and '#' in s, so that a caller-chosen
// value can be one '#'-separated part of a table key and two different
// tuples can never share a key.
func EscapeKeyPart(s string) string {
	return keyPartEscaper.Replace(s)
}

var keyPartEscaper = strings.NewReplacer("%", "%25", "#", "%23")

// Live reports whether item exists and is not past its expiresAt at now.
// Reads use it instead of trusting TTL deletion, which can lag by days.
func Live(item map[string]types.AttributeValue, now time.Time) bool {
	if len(item) == 0 {
		return false
	}
	n, ok := item[AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return true
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return err != nil || !Expired(v, now)
}

// AbsentOrExpired is the condition of a write that creates an item: none
// exists under the key (keyAttr is its hash key), or the one there is past
// its expiresAt.
func AbsentOrExpired(keyAttr string, now time.Time) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(keyAttr)).
		Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix())))
}

// Getter is the read the stores share.
type Getter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// GetLive reads one item with a consistent read and decodes it into out. ok
// is false when there is none or it has expired at now.
func GetLive(ctx context.Context, c Getter, table string, key map[string]types.AttributeValue, now time.Time, out any) (bool, error) {
	res, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, err
	}
	return DecodeLive(res.Item, now, out)
}

// DecodeLive decodes item into out when it is live at now (see Live).
func DecodeLive(item map[string]types.AttributeValue, now time.Time, out any) (bool, error) {
	if !Live(item, now) {
		return false, nil
	}
	if err := attributevalue.UnmarshalMap(item, out); err != nil {
		return false, fmt.Errorf("decode: %w", err)
	}
	return true, nil
}

// Put returns a conditional put of item into table, for PutItem (see
// PutInput) or a transaction. With returnOld the item that fails the
// condition comes back with the error (OldItem), so the failure doubles as a
// read.
func Put(table string, item any, cond expression.ConditionBuilder, returnOld bool) (*types.Put, error) {
	av, ok := item.(map[string]types.AttributeValue)
	if !ok {
		var err error
		if av, err = attributevalue.MarshalMap(item); err != nil {
			return nil, fmt.Errorf("encode: %w", err)
		}
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("condition: %w", err)
	}
	return &types.Put{
		TableName: aws.String(table), Item: av, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: onFailure(returnOld),
	}, nil
}

// onFailure is what a write asks back when its condition fails: the item it
// failed against with returnOld, else nothing.
func onFailure(returnOld bool) types.ReturnValuesOnConditionCheckFailure {
	if returnOld {
		return types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return ""
}

// PutInput turns a transaction Put into a PutItem request.
func PutInput(p *types.Put) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
		ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: p.ReturnValuesOnConditionCheckFailure,
	}
}

// Update returns a conditional update of the item under key, for UpdateItem
// (see UpdateInput) or a transaction.
func Update(table string, key map[string]types.AttributeValue, upd expression.UpdateBuilder, cond expression.ConditionBuilder, returnOld bool) (*types.Update, error) {
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("update expression: %w", err)
	}
	return &types.Update{
		TableName: aws.String(table), Key: key, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: onFailure(returnOld),
	}, nil
}

// UpdateInput turns a transaction Update into an UpdateItem request.
func UpdateInput(u *types.Update) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
	}
}

// ItemAt returns the item the transaction element i failed its condition
// against, when the element asked for it (ReturnValuesOnConditionCheckFailure)
// and the service returned it; nil otherwise. failed reports whether element
// i's condition failed.
func ItemAt(err error, i int) (item map[string]types.AttributeValue, failed bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || i >= len(tce.CancellationReasons) {
		return nil, false
	}
	r := tce.CancellationReasons[i]
	return r.Item, deref(r.Code) == "ConditionalCheckFailed"
}

// DeleteInput returns a DeleteItem of the item under key, conditional on
// cond. It builds its condition as Put does; the SDK's request types differ.
func DeleteInput(table string, key map[string]types.AttributeValue, cond expression.ConditionBuilder) (*dynamodb.DeleteItemInput, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("condition: %w", err)
	}
	return &dynamodb.DeleteItemInput{
		TableName: aws.String(table), Key: key, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}
