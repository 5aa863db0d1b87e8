// Package dynamostore is the engine.Store on a DynamoDB table: the markers
// of a function built on the engine.
//
// The rules:
//   - Claim is a conditional put. A failed condition means "already
//     processed" and is success, not an error.
//   - A lease is a conditional write with an owner and an expiry (the Lambda
//     deadline), so a concurrent twin does not run the effect at the same
//     time and a crashed holder never blocks forever.
//   - Completion, failure and release are conditional on the owner: a holder
//     whose lease expired can never overwrite a newer holder's work.
//   - A write whose response was lost and that the SDK retried finds its own
//     item: the retry is a success, never a conflict with itself.
//   - A cancelled job's marker is a tombstone: peeks see it and the job is
//     skipped like an already-processed one.
//   - Reads treat an item past its expiresAt as absent; they never trust TTL
//     deletion, which can lag by days.
//
// The table has the string hash key HandlerName, which holds
// "<job type>#<job id>" (one partition per job, so no type's markers share
// a hot key), the string range key MessageKey (the job id), and TTL on the
// number attribute expiresAt. Reads ignore an item past its expiresAt
// rather than trust TTL deletion, which can lag by days. The function's
// role needs dynamodb:GetItem, BatchGetItem, PutItem and DeleteItem on it.
package dynamostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
)

// Attribute names of a marker item. HandlerName and MessageKey are the table's
// hash and range keys; HandlerName holds PartitionKey, one value per job, so
// no job type's markers share a partition (a hot key past about 1,000 writes
// a second), and MessageKey the job's message key.
const (
	AttrHandler     = "HandlerName"
	AttrMessageKey  = "MessageKey"
	AttrState       = "state"
	AttrOwner       = "owner"
	AttrLeaseUntil  = "leaseUntil"
	AttrLeasedAt    = "leasedAt"
	AttrProcessedAt = "processedAt"
	AttrExpiresAt   = "expiresAt"
	// AttrFingerprint keeps a payload's fingerprint, AttrResult what a
	// claim stored (Do's result).
	AttrFingerprint = "fingerprint"
	AttrResult      = "result"
)

// API is the part of the DynamoDB client the store uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Store is the marker store on a DynamoDB table with hash key HandlerName
// (PartitionKey: "<job type>#<job id>") and range key MessageKey (the job
// id; both strings) and TTL on expiresAt.
type Store struct {
	client API
	table  string
	// Retention is how long a settled marker lives (DefaultRetention if 0).
	Retention time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// New returns a store on table.
func New(client API, table string) *Store {
	return &Store{client: client, table: table}
}

// Table is the table's name.
func (d *Store) Table() string { return d.table }

func (d *Store) retention() time.Duration {
	if d.Retention > 0 {
		return d.Retention
	}
	return engine.DefaultRetention
}

// now is the store's clock.
func (d *Store) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// expiry is the expiry a write asked for (Mark.Expires), or its retention
// from now when it asked for none.
func (d *Store) expiry(asked, now time.Time) time.Time {
	if asked.IsZero() {
		return now.Add(d.retention())
	}
	return asked
}

// KeyAV is the table key of k.
func KeyAV(k engine.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrHandler:    &types.AttributeValueMemberS{Value: PartitionKey(k)},
		AttrMessageKey: &types.AttributeValueMemberS{Value: k.JobID},
	}
}

// Peek reads one marker with a consistent read. ok is false when there is none
// (or it has expired).
func (d *Store) Peek(ctx context.Context, k engine.Key) (engine.Record, bool, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            KeyAV(k),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return engine.Record{}, false, fmt.Errorf("marker: peek %s/%s: %w", k.Type, k.JobID, err)
	}
	return d.Decode(out.Item)
}

// PeekBatch reads many markers with consistent reads, one BatchGetItem per 100
// keys, following UnprocessedKeys with backoff. The result holds only the
// markers that exist (and have not expired).
func (d *Store) PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	found := make(map[engine.Key]engine.Record, len(keys))
	seen := make(map[engine.Key]bool, len(keys))
	avs := make([]map[string]types.AttributeValue, 0, len(keys))
	for _, k := range keys {
		if !seen[k] { // BatchGetItem refuses duplicate keys
			seen[k] = true
			avs = append(avs, KeyAV(k))
		}
	}
	err := d.batchGet(ctx, avs, func(item map[string]types.AttributeValue) error {
		rec, ok, err := d.Decode(item)
		if ok {
			found[rec.Key] = rec
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("marker: peek batch: %w", err)
	}
	return found, nil
}

// Conditions shared by the writes.
func stateIs(s engine.State) expression.ConditionBuilder {
	return expression.Name(AttrState).Equal(expression.Value(s))
}

func ownedBy(owner string) expression.ConditionBuilder {
	return expression.Name(AttrOwner).Equal(expression.Value(owner))
}

// Lease takes the lease on k for m.Owner until m.Until, keeping
// m.Fingerprint. It succeeds when there is no marker, when the previous
// lease expired, or when the owner already holds it. Otherwise it returns
// the marker found with ErrProcessed, ErrCancelled, ErrFailed or
// ErrLeaseHeld: a failed lease doubles as a peek.
func (d *Store) Lease(ctx context.Context, k engine.Key, m engine.Mark) (engine.Record, error) {
	now := d.now()
	rec := engine.Record{Key: k, State: engine.StateLeased, Owner: m.Owner, LeaseUntil: m.Until, LeasedAt: now.Truncate(time.Millisecond),
		ExpiresAt: d.expiry(m.Expires, m.Until), Fingerprint: m.Fingerprint}
	cond := absentOrExpired(now).Or(stateIs(engine.StateLeased).And(expression.Or(
		expression.Name(AttrLeaseUntil).LessThanEqual(expression.Value(now.UnixMilli())),
		ownedBy(m.Owner),
	)))
	return d.take(ctx, rec, cond, "lease")
}

// Claim records k as processed, with m.Fingerprint and m.Result, until
// m.Expires, and reports whether this call wrote the marker (false: it was
// already processed). With m.Owner "" it is the plain
// conditional put (attribute_not_exists): a failed condition means already
// processed and is no error. With an owner it completes that owner's lease:
// it succeeds when the owner still holds the lease (or there is no marker),
// returns false and nil when the marker is already settled, and
// ErrLeaseLost when another worker took the lease over. A claim whose
// response was lost and that the SDK retried finds its own marker and wins.
func (d *Store) Claim(ctx context.Context, k engine.Key, m engine.Mark) (bool, error) {
	now := d.now()
	cond := absentOrExpired(now)
	owner := m.Owner
	if owner == "" {
		owner = "claim:" + token()
	} else {
		cond = cond.Or(stateIs(engine.StateLeased).And(ownedBy(owner)))
	}
	rec := engine.Record{Key: k, State: engine.StateDone, Owner: owner, ProcessedAt: now, ExpiresAt: d.expiry(m.Expires, now),
		Fingerprint: m.Fingerprint, Result: m.Result}
	old, failed, err := d.put(ctx, rec, cond)
	switch {
	case err != nil:
		return false, fmt.Errorf("marker: claim %s/%s: %w", k.Type, k.JobID, err)
	case !failed:
		return true, nil
	case old.State == engine.StateDone && old.Owner == owner:
		return true, nil // this very claim, retried after its response was lost
	case old.Settled():
		return false, nil
	}
	return false, engine.ErrLeaseLost
}

// Fail records that k's job failed and was dead-lettered: StateFailed, which
// only a redrive clears, so no other copy of the job runs meanwhile. With an
// owner it turns that owner's claim (a claim-then-effect job whose effect
// failed after its claim) or lease (a job that failed on its final attempt)
// into StateFailed; with m.Owner "" (no worker holds the job) it succeeds when
// there is no marker or only an expired lease. A marker that is already
// FAILED is success. Otherwise it returns ErrLeaseLost: the job is done,
// cancelled, or another worker holds it.
func (d *Store) Fail(ctx context.Context, k engine.Key, m engine.Mark) error {
	now := d.now()
	owner := m.Owner
	rec := engine.Record{Key: k, State: engine.StateFailed, Owner: owner, ProcessedAt: now, ExpiresAt: d.expiry(m.Expires, now), Fingerprint: m.Fingerprint}
	cond := absentOrExpired(now).Or(stateIs(engine.StateLeased).And(expression.Name(AttrLeaseUntil).LessThanEqual(expression.Value(now.UnixMilli()))))
	if owner != "" {
		cond = ownedBy(owner).And(expression.Or(stateIs(engine.StateDone), stateIs(engine.StateLeased)))
	}
	_, failed, err := d.put(ctx, rec, cond.Or(stateIs(engine.StateFailed)))
	switch {
	case err != nil:
		return fmt.Errorf("marker: fail %s/%s: %w", k.Type, k.JobID, err)
	case failed:
		return engine.ErrLeaseLost
	}
	return nil
}

// Tombstone marks k cancelled, so its effect never runs: it succeeds when
// there is no marker, when a lease on it expired, or when it is already
// cancelled. Otherwise it returns the marker found with ErrProcessed,
// ErrFailed or ErrLeaseHeld (the job is running). due is the job's run
// time: the tombstone outlives the last copy of the job that can still be
// delivered (its one-time schedule's firing, however far ahead).
func (d *Store) Tombstone(ctx context.Context, k engine.Key, due time.Time) (engine.Record, error) {
	now := d.now()
	rec := engine.Record{Key: k, State: engine.StateCancelled, ProcessedAt: now, ExpiresAt: engine.SettledUntil(now, due, d.retention())}
	cond := absentOrExpired(now).Or(stateIs(engine.StateCancelled)).Or(stateIs(engine.StateLeased).And(
		expression.Name(AttrLeaseUntil).LessThanEqual(expression.Value(now.UnixMilli()))))
	return d.take(ctx, rec, cond, "cancel")
}

// take writes rec under cond and returns it; when the condition fails it
// returns the marker found with the error that marker means (settledErr).
func (d *Store) take(ctx context.Context, rec engine.Record, cond expression.ConditionBuilder, op string) (engine.Record, error) {
	old, failed, err := d.put(ctx, rec, cond)
	switch {
	case err != nil:
		return engine.Record{}, fmt.Errorf("marker: %s %s/%s: %w", op, rec.Key.Type, rec.Key.JobID, err)
	case failed:
		return old, settledErr(old)
	}
	return rec, nil
}

// Release gives up owner's lease on k so a retry need not wait for it to
// expire. It deletes the marker only while owner still holds the lease; if
// not, there is nothing of owner's to release and it returns nil.
func (d *Store) Release(ctx context.Context, k engine.Key, owner string) error {
	expr, err := expression.NewBuilder().WithCondition(stateIs(engine.StateLeased).And(ownedBy(owner))).Build()
	if err != nil {
		return fmt.Errorf("marker: release: %w", err)
	}
	_, err = d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(d.table), Key: KeyAV(k), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if _, failed := conditionFailed(err); err == nil || failed {
		return nil
	}
	return fmt.Errorf("marker: release %s/%s: %w", k.Type, k.JobID, err)
}

// item is a marker as stored.
type item struct {
	HandlerName string       `dynamodbav:"HandlerName"` // PartitionKey
	MessageKey  string       `dynamodbav:"MessageKey"`
	State       engine.State `dynamodbav:"state"`
	Owner       string       `dynamodbav:"owner,omitempty"`
	LeaseUntil  int64        `dynamodbav:"leaseUntil,omitempty"` // epoch milliseconds
	LeasedAt    int64        `dynamodbav:"leasedAt,omitempty"`   // epoch milliseconds
	ProcessedAt string       `dynamodbav:"processedAt,omitempty"`
	ExpiresAt   int64        `dynamodbav:"expiresAt"` // epoch seconds (TTL)
	Fingerprint string       `dynamodbav:"fingerprint,omitempty"`
	Result      []byte       `dynamodbav:"result,omitempty"`
}

// put writes rec under cond. failed reports a failed condition, with the
// item that failed it (read when the service did not return it).
func (d *Store) put(ctx context.Context, rec engine.Record, cond expression.ConditionBuilder) (old engine.Record, failed bool, err error) {
	it := item{
		HandlerName: PartitionKey(rec.Key), MessageKey: rec.Key.JobID, State: rec.State, Owner: rec.Owner,
		ExpiresAt: rec.ExpiresAt.Unix(), Fingerprint: rec.Fingerprint, Result: rec.Result,
	}
	if !rec.LeaseUntil.IsZero() {
		it.LeaseUntil = rec.LeaseUntil.UnixMilli()
	}
	if !rec.LeasedAt.IsZero() {
		it.LeasedAt = rec.LeasedAt.UnixMilli()
	}
	if !rec.ProcessedAt.IsZero() {
		it.ProcessedAt = rec.ProcessedAt.UTC().Format(time.RFC3339Nano)
	}
	in, err := d.putIf(it, cond)
	if err != nil {
		return engine.Record{}, false, err
	}
	_, err = d.client.PutItem(ctx, in)
	av, failed := conditionFailed(err)
	if !failed {
		return engine.Record{}, false, err
	}
	if av != nil {
		old, _, err = d.Decode(av)
		return old, true, err
	}
	old, _, err = d.Peek(ctx, rec.Key)
	return old, true, err
}

// Decode decodes a marker item; ok is false for no item or an expired one.
func (d *Store) Decode(av map[string]types.AttributeValue) (engine.Record, bool, error) {
	var it item
	if !live(av, d.now()) {
		return engine.Record{}, false, nil
	}
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return engine.Record{}, false, fmt.Errorf("marker: decode: %w", err)
	}
	r := engine.Record{Key: keyOf(it.HandlerName, it.MessageKey), State: it.State, Owner: it.Owner, Fingerprint: it.Fingerprint, Result: it.Result}
	if r.State == "" { // a marker written by a plain claim from another tool
		r.State = engine.StateDone
	}
	if it.ExpiresAt > 0 {
		r.ExpiresAt = time.Unix(it.ExpiresAt, 0)
	}
	if it.LeaseUntil > 0 {
		r.LeaseUntil = time.UnixMilli(it.LeaseUntil)
	}
	if it.LeasedAt > 0 {
		r.LeasedAt = time.UnixMilli(it.LeasedAt)
	}
	if it.ProcessedAt != "" {
		r.ProcessedAt, _ = time.Parse(time.RFC3339Nano, it.ProcessedAt)
	}
	return r, true, nil
}

// token returns a random token that names one claim.
func token() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// PartitionKey is the value of k's hash key (AttrHandler):
// "<handler>#<message key>", one per job.
func PartitionKey(k engine.Key) string { return k.Type + "#" + k.JobID }

// keyOf is the key of a marker item from its two key attributes: the handler
// is the hash key without "#<message key>".
func keyOf(partition, messageKey string) engine.Key {
	return engine.Key{Type: strings.TrimSuffix(partition, "#"+messageKey), JobID: messageKey}
}

// settledErr is the error a write that must not overwrite old returns.
func settledErr(old engine.Record) error { return old.Conflict() }
