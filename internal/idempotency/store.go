package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Attribute names of the idempotency-keys table.
const (
	AttrPK          = "pk"
	AttrState       = "state"
	AttrOwner       = "owner"
	AttrFingerprint = "fingerprint"
	AttrLockedUntil = "lockedUntil"
	AttrExpiresAt   = "expiresAt"
)

// Errors of Complete.
var (
	// ErrLockLost: the lock expired and another request took over; this
	// request's response was not stored.
	ErrLockLost = errors.New("idempotency: lock lost to another request")
	// ErrCompanionFailed: a write committed together with the completion
	// failed its condition, so nothing was written. Complete again without it.
	ErrCompanionFailed = errors.New("idempotency: companion write failed its condition")
)

// Store is the idempotency-keys table. Call NewStore.
type Store struct {
	client DynamoAPI
	table  string
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// LockTimeout is how long a lock is held (DefaultLockTimeout if 0).
	LockTimeout time.Duration
	// Retention is how long a record lives (DefaultRetention if 0).
	Retention time.Duration
}

// NewStore returns the store on table (hash key pk, TTL on expiresAt).
func NewStore(client DynamoAPI, table string) *Store {
	return &Store{client: client, table: table}
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) lockTimeout() time.Duration {
	if s.LockTimeout > 0 {
		return s.LockTimeout
	}
	return DefaultLockTimeout
}

func (s *Store) retention() time.Duration {
	if s.Retention > 0 {
		return s.Retention
	}
	return DefaultRetention
}

// record is a request as stored.
type record struct {
	PK          string `dynamodbav:"pk"`
	State       State  `dynamodbav:"state"`
	Fingerprint string `dynamodbav:"fingerprint"`
	Owner       string `dynamodbav:"owner,omitempty"`
	LockedUntil int64  `dynamodbav:"lockedUntil,omitempty"` // epoch milliseconds
	Response
	CreatedAt int64 `dynamodbav:"createdAt"` // epoch milliseconds
	ExpiresAt int64 `dynamodbav:"expiresAt"` // epoch seconds (TTL)
}

func keyAV(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

// maxBeginAttempts bounds Begin's read-write loop under contention.
const maxBeginAttempts = 3

// Begin starts a request from caller with key and fingerprint. A completed
// request is a replay and costs one consistent read and no write; a new one
// costs the read and one conditional put.
func (s *Store) Begin(ctx context.Context, caller, key, fingerprint string) (Result, error) {
	pk := PK(caller, key)
	for range maxBeginAttempts {
		old, ok, err := s.get(ctx, pk)
		if err != nil {
			return Result{}, err
		}
		now := s.now()
		cond := expression.AttributeNotExists(expression.Name(AttrPK)).
			Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix())))
		if ok {
			if r, decided := s.decide(old, fingerprint, now); decided {
				return r, nil
			}
			// A crashed request's lock expired: take over from that owner.
			cond = expression.Name(AttrOwner).Equal(expression.Value(old.Owner)).
				And(expression.Name(AttrState).Equal(expression.Value(StateInProgress)))
		}
		lock := Lock{PK: pk, Owner: newOwner(), Fingerprint: fingerprint, LockedUntil: now.Add(s.lockTimeout())}
		rec := record{
			PK: pk, State: StateInProgress, Fingerprint: fingerprint, Owner: lock.Owner,
			LockedUntil: lock.LockedUntil.UnixMilli(), CreatedAt: now.UnixMilli(),
			ExpiresAt: now.Add(s.retention()).Unix(),
		}
		put, err := s.put(rec, cond)
		if err != nil {
			return Result{}, err
		}
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
			ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
		})
		if err == nil {
			return Result{Outcome: Acquired, Lock: lock}, nil
		}
		if !ddb.IsConditionFailed(err) {
			return Result{}, fmt.Errorf("idempotency: lock %s: %w", pk, err)
		}
		// Another request won the race: read what it wrote.
	}
	return Result{Outcome: InFlight, RetryAfter: time.Second}, nil
}

// decide settles Begin from an existing live record, or returns decided=false
// when its lock has expired and may be taken over.
func (s *Store) decide(old record, fingerprint string, now time.Time) (Result, bool) {
	switch {
	case old.Fingerprint != fingerprint:
		return Result{Outcome: Mismatch}, true
	case old.State == StateCompleted:
		return Result{Outcome: Replay, Response: old.Response}, true
	}
	if wait := time.UnixMilli(old.LockedUntil).Sub(now); wait > 0 {
		return Result{Outcome: InFlight, RetryAfter: wait}, true
	}
	return Result{}, false
}

// get reads a record (consistent); ok is false when absent or expired.
func (s *Store) get(ctx context.Context, pk string) (record, bool, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyAV(pk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return record{}, false, fmt.Errorf("idempotency: get %s: %w", pk, err)
	}
	if len(out.Item) == 0 {
		return record{}, false, nil
	}
	var r record
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return record{}, false, fmt.Errorf("idempotency: decode %s: %w", pk, err)
	}
	if ddb.Expired(r.ExpiresAt, s.now()) {
		return record{}, false, nil
	}
	return r, true, nil
}

func (s *Store) put(rec record, cond expression.ConditionBuilder) (*types.Put, error) {
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return nil, fmt.Errorf("idempotency: encode: %w", err)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("idempotency: condition: %w", err)
	}
	return &types.Put{
		TableName: aws.String(s.table), Item: item, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

func ownerCond(lock Lock) expression.ConditionBuilder {
	return expression.Name(AttrOwner).Equal(expression.Value(lock.Owner)).
		And(expression.Name(AttrState).Equal(expression.Value(StateInProgress)))
}

// Complete stores resp as the response of the request holding lock,
// conditional on lock still being held. The caller must not complete with a
// 5xx response (Release instead). with are writes to commit atomically with
// the completion (one TransactWriteItems instead of a PutItem); when one of
// them fails its condition nothing is written and the error matches
// ErrCompanionFailed. A lost lock returns ErrLockLost.
func (s *Store) Complete(ctx context.Context, lock Lock, resp Response, with ...types.TransactWriteItem) error {
	now := s.now()
	rec := record{
		PK: lock.PK, State: StateCompleted, Fingerprint: lock.Fingerprint, Response: resp,
		CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(s.retention()).Unix(),
	}
	put, err := s.put(rec, ownerCond(lock))
	if err != nil {
		return err
	}
	if len(with) == 0 {
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
			ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
		})
		if ddb.IsConditionFailed(err) {
			return fmt.Errorf("idempotency: complete %s: %w", lock.PK, ErrLockLost)
		}
		if err != nil {
			return fmt.Errorf("idempotency: complete %s: %w", lock.PK, err)
		}
		return nil
	}
	items := append(append(make([]types.TransactWriteItem, 0, len(with)+1), with...), types.TransactWriteItem{Put: put})
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch {
	case err == nil:
		return nil
	case !ddb.IsConditionFailed(err):
		return fmt.Errorf("idempotency: complete %s: %w", lock.PK, err)
	case ownReasonFailed(err, len(with)):
		return fmt.Errorf("idempotency: complete %s: %w", lock.PK, ErrLockLost)
	}
	return fmt.Errorf("idempotency: complete %s: %w: %w", lock.PK, ErrCompanionFailed, err)
}

// ownReasonFailed reports whether the transaction item at index i (the
// completion) is the one whose condition failed.
func ownReasonFailed(err error, i int) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || i >= len(tce.CancellationReasons) {
		return false
	}
	return aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

// Release gives up the lock without storing a response (validation failures
// never get here; 5xx responses and requests that must stay retryable do), so
// the key can be used again at once. A lock already lost is not an error.
func (s *Store) Release(ctx context.Context, lock Lock) error {
	expr, err := expression.NewBuilder().WithCondition(ownerCond(lock)).Build()
	if err != nil {
		return fmt.Errorf("idempotency: release: %w", err)
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: keyAV(lock.PK), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("idempotency: release %s: %w", lock.PK, err)
	}
	return nil
}

func newOwner() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}
