package scalemodel

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/jobs"
)

// MaxWritesPerSecond is about what one DynamoDB item, or one partition key
// of an index, sustains: 1,000 write units a second.
const MaxWritesPerSecond = 1000

// DB is a simulated jobs table: jobs.DynamoAPI and sweepindex.QueryAPI on
// a map, with DynamoDB's limits. A write that would make an item larger
// than MaxItemSize is refused (ValidationException), and so is the
// MaxWritesPerSecond+1st write of an item, or of a partition key of the
// index sweep, within one second of the clock (ThrottlingException: as
// DynamoDB throttles a hot key, and a base table write whose index
// partition is throttled). Every call takes Latency of the clock first.
// It is safe for concurrent use.
type DB struct {
	// Latency is what each call takes.
	Latency time.Duration
	// OnWrite, when set, sees every item written (new is nil for a
	// delete), under the DB's lock: it must not call the DB.
	OnWrite func(key string, old, new map[string]types.AttributeValue)

	mu     sync.Mutex
	items  map[string]item
	shards map[string]map[string]bool // index sweep: shard → pks
	// writes counts the writes of second sec, by item key or
	// "index:"+shard: a new second starts it afresh, so it holds the keys
	// of one second, not of every item ever written.
	writes map[string]int
	sec    int64
	stats  Stats
}

// Stats is what the DB saw.
type Stats struct {
	Calls, Writes int
	// MostItemWrites is the most writes any one item took within one
	// second (MostItemKey names it); MostIndexWrites the most any one
	// partition key of the index took.
	MostItemWrites  int
	MostItemKey     string
	MostIndexWrites int
	// LargestItem is the largest item size written (LargestKey names it).
	LargestItem int
	LargestKey  string
	// Throttled and TooLarge count the writes refused.
	Throttled, TooLarge int
}

// NewDB returns an empty table.
func NewDB() *DB {
	return &DB{items: map[string]item{}, shards: map[string]map[string]bool{}, writes: map[string]int{}}
}

// Stats returns what the DB saw so far.
func (d *DB) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Len is how many items the table holds.
func (d *DB) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items)
}

// Count is how many items the table holds under keys with one of
// prefixes.
func (d *DB) Count(prefixes ...string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for pk := range d.items {
		for _, p := range prefixes {
			if strings.HasPrefix(pk, p) {
				n++
				break
			}
		}
	}
	return n
}

// Item returns a copy of the item under pk (nil: none).
func (d *DB) Item(pk string) map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return clone(d.items[pk])
}

// Drop deletes the items under pks at once, as TTL deletion would long
// after (the model drops what it has checked, to bound its memory).
func (d *DB) Drop(pks ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, pk := range pks {
		if old, ok := d.items[pk]; ok {
			d.index(pk, old, nil)
			delete(d.items, pk)
		}
	}
}

func (d *DB) call() {
	if d.Latency > 0 {
		time.Sleep(d.Latency)
	}
	d.mu.Lock()
	d.stats.Calls++
	d.mu.Unlock()
}

func keyOf(key map[string]types.AttributeValue) (string, error) {
	pk, ok := key[jobs.AttrPK].(*types.AttributeValueMemberS)
	if !ok || len(key) != 1 {
		return "", &smithy.GenericAPIError{Code: "ValidationException", Message: "The provided key element does not match the schema"}
	}
	return pk.Value, nil
}

// GetItem reads one item.
func (d *DB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.call()
	pk, err := keyOf(in.Key)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A stored item is never changed in place (a write stores a new one),
	// so a read hands it out as it is.
	return &dynamodb.GetItemOutput{Item: project(d.items[pk], aws.ToString(in.ProjectionExpression), in.ExpressionAttributeNames)}, nil
}

// BatchGetItem reads up to 100 items of this table.
func (d *DB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.call()
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for table, ka := range in.RequestItems {
		if len(ka.Keys) > 100 {
			return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "Too many items requested for the BatchGetItem call"}
		}
		for _, k := range ka.Keys {
			pk, err := keyOf(k)
			if err != nil {
				return nil, err
			}
			if it, ok := d.items[pk]; ok {
				out.Responses[table] = append(out.Responses[table], project(it, aws.ToString(ka.ProjectionExpression), ka.ExpressionAttributeNames))
			}
		}
	}
	return out, nil
}

// write is one write of a request: its key and what it makes of the item.
type write struct {
	pk       string
	old, new item
}

// UpdateItem applies an update expression, on its condition.
func (d *DB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.call()
	d.mu.Lock()
	defer d.mu.Unlock()
	w, failed, err := d.prepareUpdate(in.Key, aws.ToString(in.UpdateExpression), aws.ToString(in.ConditionExpression),
		env{in.ExpressionAttributeNames, in.ExpressionAttributeValues})
	switch {
	case err != nil:
		return nil, err
	case failed:
		ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		if in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = clone(w.old)
		}
		return nil, ccf
	}
	if err := d.apply(w); err != nil {
		return nil, err
	}
	out := &dynamodb.UpdateItemOutput{}
	switch in.ReturnValues {
	case types.ReturnValueAllOld:
		out.Attributes = clone(w.old)
	case types.ReturnValueAllNew:
		out.Attributes = clone(w.new)
	}
	return out, nil
}

// prepareUpdate evaluates an update of the item under key: failed when its
// condition does not hold.
func (d *DB) prepareUpdate(key map[string]types.AttributeValue, upd, cond string, e env) (write, bool, error) {
	pk, err := keyOf(key)
	if err != nil {
		return write{}, false, err
	}
	old := d.items[pk]
	ok, err := condition(cond, e, old)
	if err != nil {
		return write{}, false, validation(err)
	}
	if !ok {
		return write{pk: pk, old: old}, true, nil
	}
	next := clone(old)
	if next == nil {
		next = item{jobs.AttrPK: &types.AttributeValueMemberS{Value: pk}}
	}
	if err := update(upd, e, next); err != nil {
		return write{}, false, validation(err)
	}
	return write{pk: pk, old: old, new: next}, false, nil
}

func validation(err error) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: err.Error()}
}

// TransactWriteItems applies every element or none.
func (d *DB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.call()
	d.mu.Lock()
	defer d.mu.Unlock()
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	var ws []write
	cancelled := false
	seen := map[string]bool{}
	for i, it := range in.TransactItems {
		reasons[i].Code = aws.String("None")
		var (
			w      write
			failed bool
			err    error
			onFail types.ReturnValuesOnConditionCheckFailure
		)
		switch {
		case it.Update != nil:
			u := it.Update
			onFail = u.ReturnValuesOnConditionCheckFailure
			w, failed, err = d.prepareUpdate(u.Key, aws.ToString(u.UpdateExpression), aws.ToString(u.ConditionExpression),
				env{u.ExpressionAttributeNames, u.ExpressionAttributeValues})
		case it.Put != nil:
			p := it.Put
			onFail = p.ReturnValuesOnConditionCheckFailure
			w, failed, err = d.preparePut(p)
		case it.ConditionCheck != nil:
			c := it.ConditionCheck
			onFail = c.ReturnValuesOnConditionCheckFailure
			w, failed, err = d.prepareUpdate(c.Key, "", aws.ToString(c.ConditionExpression), env{c.ExpressionAttributeNames, c.ExpressionAttributeValues})
			w.new = nil
		default:
			return nil, validation(fmt.Errorf("transaction element %d is not simulated", i))
		}
		if err != nil {
			return nil, err
		}
		if seen[w.pk] {
			return nil, validation(fmt.Errorf("transaction request cannot include multiple operations on one item"))
		}
		seen[w.pk] = true
		if failed {
			cancelled = true
			reasons[i].Code = aws.String("ConditionalCheckFailed")
			if onFail == types.ReturnValuesOnConditionCheckFailureAllOld {
				reasons[i].Item = clone(w.old)
			}
			continue
		}
		if w.new != nil {
			ws = append(ws, w)
		}
	}
	if cancelled {
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	}
	if err := d.apply(ws...); err != nil {
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (d *DB) preparePut(p *types.Put) (write, bool, error) {
	pk, err := keyOf(map[string]types.AttributeValue{jobs.AttrPK: p.Item[jobs.AttrPK]})
	if err != nil {
		return write{}, false, err
	}
	old := d.items[pk]
	ok, err := condition(aws.ToString(p.ConditionExpression), env{p.ExpressionAttributeNames, p.ExpressionAttributeValues}, old)
	if err != nil {
		return write{}, false, validation(err)
	}
	return write{pk: pk, old: old, new: clone(p.Item)}, !ok, nil
}

// apply checks ws against the limits (all refused if one is) and writes
// them.
func (d *DB) apply(ws ...write) error {
	if sec := time.Now().Unix(); sec != d.sec {
		d.sec, d.writes = sec, map[string]int{}
	}
	for _, w := range ws {
		if size := ItemSize(w.new); size > MaxItemSize {
			d.stats.TooLarge++
			return &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}
		}
		if d.writes[w.pk] >= MaxWritesPerSecond {
			d.stats.Throttled++
			return throttled(w.pk)
		}
		for _, shard := range indexChange(w.old, w.new) {
			if d.writes["index:"+shard] >= MaxWritesPerSecond {
				d.stats.Throttled++
				return throttled("index sweep " + shard)
			}
		}
	}
	for _, w := range ws {
		d.stats.Writes++
		d.bump(w.pk, &d.stats.MostItemWrites, &d.stats.MostItemKey)
		for _, shard := range indexChange(w.old, w.new) {
			var k string
			d.bump("index:"+shard, &d.stats.MostIndexWrites, &k)
		}
		if size := ItemSize(w.new); size > d.stats.LargestItem {
			d.stats.LargestItem, d.stats.LargestKey = size, w.pk
		}
		d.index(w.pk, w.old, w.new)
		d.items[w.pk] = w.new
		if d.OnWrite != nil {
			d.OnWrite(w.pk, w.old, w.new)
		}
	}
	return nil
}

func throttled(what string) error {
	return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Throughput exceeds the current capacity for one partition key: " + what}
}

func (d *DB) bump(key string, most *int, mostKey *string) {
	d.writes[key]++
	if n := d.writes[key]; n > *most {
		*most, *mostKey = n, key
	}
}
