package marker

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
)

// DynamoAPI is the part of the DynamoDB client the store uses.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Dynamo is the marker store on a DynamoDB table with hash key HandlerName and
// range key MessageKey (both strings) and TTL on expiresAt.
type Dynamo struct {
	client DynamoAPI
	table  string
	// Retention is how long a claimed marker lives (DefaultRetention if 0).
	Retention time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewDynamo returns a store on table.
func NewDynamo(client DynamoAPI, table string) *Dynamo {
	return &Dynamo{client: client, table: table}
}

func (d *Dynamo) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dynamo) retention() time.Duration {
	if d.Retention > 0 {
		return d.Retention
	}
	return DefaultRetention
}

func keyAV(k Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrHandler:    &types.AttributeValueMemberS{Value: k.Handler},
		AttrMessageKey: &types.AttributeValueMemberS{Value: k.MessageKey},
	}
}

// Peek reads one marker with a consistent read. ok is false when there is none
// (or it has expired).
func (d *Dynamo) Peek(ctx context.Context, k Key) (Record, bool, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            keyAV(k),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Record{}, false, fmt.Errorf("marker: peek %s/%s: %w", k.Handler, k.MessageKey, err)
	}
	return d.decodeLive(out.Item)
}

// maxBatchGet is DynamoDB's limit of keys per BatchGetItem.
const maxBatchGet = 100

// PeekBatch reads many markers with consistent reads, one BatchGetItem per 100
// keys, following UnprocessedKeys with backoff. The result holds only the
// markers that exist (and have not expired).
func (d *Dynamo) PeekBatch(ctx context.Context, keys []Key) (map[Key]Record, error) {
	found := make(map[Key]Record, len(keys))
	seen := make(map[Key]bool, len(keys))
	for start := 0; start < len(keys); start += maxBatchGet {
		chunk := make([]map[string]types.AttributeValue, 0, maxBatchGet)
		for _, k := range keys[start:min(start+maxBatchGet, len(keys))] {
			if !seen[k] { // BatchGetItem refuses duplicate keys
				seen[k] = true
				chunk = append(chunk, keyAV(k))
			}
		}
		req := map[string]types.KeysAndAttributes{d.table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				if err := sleep(ctx, backoff(attempt)); err != nil {
					return nil, fmt.Errorf("marker: peek batch: %w", err)
				}
			}
			if attempt == maxUnprocessedAttempts {
				return nil, fmt.Errorf("marker: peek batch: keys still unprocessed after %d attempts", attempt)
			}
			out, err := d.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("marker: peek batch: %w", err)
			}
			for _, item := range out.Responses[d.table] {
				rec, ok, err := d.decodeLive(item)
				if err != nil {
					return nil, err
				}
				if ok {
					found[rec.Key] = rec
				}
			}
			req = out.UnprocessedKeys
		}
	}
	return found, nil
}

const maxUnprocessedAttempts = 8

func backoff(attempt int) time.Duration {
	return min(time.Duration(1<<attempt)*10*time.Millisecond, time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Lease takes the lease on k for owner until the given time. It succeeds when
// there is no marker, when the previous lease expired, or when owner already
// holds it. Otherwise it returns the marker found with ErrProcessed or
// ErrLeaseHeld: a failed lease doubles as a peek.
func (d *Dynamo) Lease(ctx context.Context, k Key, owner string, until time.Time) (Record, error) {
	now := d.now()
	rec := Record{Key: k, State: StateLeased, Owner: owner, LeaseUntil: until, ExpiresAt: until.Add(d.retention())}
	// Free when absent, expired, or leased with an expired lease or by owner.
	cond := absentOrExpired(now).Or(expression.And(
		expression.Name(AttrState).Equal(expression.Value(StateLeased)),
		expression.Or(
			expression.Name(AttrLeaseUntil).LessThanEqual(expression.Value(now.UnixMilli())),
			expression.Name(AttrOwner).Equal(expression.Value(owner)),
		),
	))
	_, err := d.put(ctx, rec, cond, true)
	if err == nil {
		return rec, nil
	}
	if !ddb.IsConditionFailed(err) {
		return Record{}, fmt.Errorf("marker: lease %s/%s: %w", k.Handler, k.MessageKey, err)
	}
	old, ok, derr := d.oldOrPeek(ctx, k, err)
	if derr != nil {
		return Record{}, derr
	}
	if ok && old.Processed() {
		return old, ErrProcessed
	}
	return old, ErrLeaseHeld
}

// Claim records k as processed and reports whether this call wrote the
// marker (false: it was already processed). With owner "" it is the plain
// conditional put (attribute_not_exists): a failed condition means already
// processed and is no error. With an owner it completes that owner's lease: it succeeds when
// the owner still holds the lease (or there is no marker), returns nil when
// the marker is already claimed, and ErrLeaseLost when another worker took
// the lease over.
func (d *Dynamo) Claim(ctx context.Context, k Key, owner string) (bool, error) {
	now := d.now()
	rec := Record{Key: k, State: StateDone, ProcessedAt: now, ExpiresAt: now.Add(d.retention())}
	cond := absentOrExpired(now)
	if owner != "" {
		cond = cond.Or(expression.And(
			expression.Name(AttrState).Equal(expression.Value(StateLeased)),
			expression.Name(AttrOwner).Equal(expression.Value(owner)),
		))
	}
	_, err := d.put(ctx, rec, cond, owner != "")
	if err == nil {
		return true, nil
	}
	if !ddb.IsConditionFailed(err) {
		return false, fmt.Errorf("marker: claim %s/%s: %w", k.Handler, k.MessageKey, err)
	}
	if owner == "" {
		return false, nil // already exists: already processed
	}
	old, ok, derr := d.oldOrPeek(ctx, k, err)
	if derr != nil {
		return false, derr
	}
	if ok && old.Processed() {
		return false, nil
	}
	return false, ErrLeaseLost
}

// Release gives up owner's lease on k so a retry need not wait for it to
// expire. It deletes the marker only while owner still holds the lease; if
// not, there is nothing of owner's to release and it returns nil.
func (d *Dynamo) Release(ctx context.Context, k Key, owner string) error {
	expr, err := expression.NewBuilder().WithCondition(expression.And(
		expression.Name(AttrState).Equal(expression.Value(StateLeased)),
		expression.Name(AttrOwner).Equal(expression.Value(owner)),
	)).Build()
	if err != nil {
		return fmt.Errorf("marker: release: %w", err)
	}
	_, err = d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       keyAV(k),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err == nil || ddb.IsConditionFailed(err) {
		return nil
	}
	return fmt.Errorf("marker: release %s/%s: %w", k.Handler, k.MessageKey, err)
}

// oldOrPeek returns the item a failed condition returned, or reads it when
// the service did not return it.
func (d *Dynamo) oldOrPeek(ctx context.Context, k Key, condErr error) (Record, bool, error) {
	if item := ddb.OldItem(condErr); item != nil {
		return d.decodeLive(item)
	}
	return d.Peek(ctx, k)
}

// item is a marker as stored.
type item struct {
	HandlerName string `dynamodbav:"HandlerName"`
	MessageKey  string `dynamodbav:"MessageKey"`
	State       State  `dynamodbav:"state"`
	Owner       string `dynamodbav:"owner,omitempty"`
	LeaseUntil  int64  `dynamodbav:"leaseUntil,omitempty"` // epoch milliseconds
	ProcessedAt string `dynamodbav:"processedAt,omitempty"`
	ExpiresAt   int64  `dynamodbav:"expiresAt"` // epoch seconds (TTL)
}

func absentOrExpired(now time.Time) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(AttrHandler)).
		Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix())))
}

// put writes rec under cond; returnOld asks for the old item on a failed
// condition, so the failure doubles as a peek.
func (d *Dynamo) put(ctx context.Context, rec Record, cond expression.ConditionBuilder, returnOld bool) (*dynamodb.PutItemOutput, error) {
	it := item{
		HandlerName: rec.Key.Handler, MessageKey: rec.Key.MessageKey, State: rec.State, Owner: rec.Owner,
		ExpiresAt: rec.ExpiresAt.Unix(),
	}
	if !rec.LeaseUntil.IsZero() {
		it.LeaseUntil = rec.LeaseUntil.UnixMilli()
	}
	if !rec.ProcessedAt.IsZero() {
		it.ProcessedAt = rec.ProcessedAt.UTC().Format(time.RFC3339Nano)
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("marker: encode: %w", err)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("marker: condition: %w", err)
	}
	in := &dynamodb.PutItemInput{
		TableName:                 aws.String(d.table),
		Item:                      av,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	if returnOld {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return d.client.PutItem(ctx, in)
}

// decodeLive decodes an item; ok is false for no item or an expired one.
func (d *Dynamo) decodeLive(av map[string]types.AttributeValue) (Record, bool, error) {
	if len(av) == 0 {
		return Record{}, false, nil
	}
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return Record{}, false, fmt.Errorf("marker: decode: %w", err)
	}
	if ddb.Expired(it.ExpiresAt, d.now()) {
		return Record{}, false, nil
	}
	r := Record{Key: Key{Handler: it.HandlerName, MessageKey: it.MessageKey}, State: it.State, Owner: it.Owner}
	if r.State == "" { // a marker written by a plain claim from another tool
		r.State = StateDone
	}
	if it.ExpiresAt > 0 {
		r.ExpiresAt = time.Unix(it.ExpiresAt, 0)
	}
	if it.LeaseUntil > 0 {
		r.LeaseUntil = time.UnixMilli(it.LeaseUntil)
	}
	if it.ProcessedAt != "" {
		r.ProcessedAt, _ = time.Parse(time.RFC3339Nano, it.ProcessedAt)
	}
	return r, true, nil
}
