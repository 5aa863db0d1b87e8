package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
)

// DynamoAPI is the part of the DynamoDB client the store uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
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
	AttrExpiresAt   = ddb.AttrExpiresAt
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

// Companion is a write of another store committed atomically with a
// completion (the job's promotion): Complete puts it in the same
// transaction.
type Companion interface {
	TransactItem() (types.TransactWriteItem, error)
}

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

func (s *Store) now() time.Time { return ddb.Now(s.Now) }

func (s *Store) lockTimeout() time.Duration { return ddb.DurationOr(s.LockTimeout, DefaultLockTimeout) }

func (s *Store) retention() time.Duration { return ddb.DurationOr(s.Retention, DefaultRetention) }

// record is a request as stored. Owner stays on a completed record, so a
// completion retried after a lost response finds its own work.
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

func keyAV(pk string) map[string]types.AttributeValue { return ddb.KeyS(AttrPK, pk) }

// maxBeginAttempts bounds Begin's write-decide loop under contention.
const maxBeginAttempts = 3

// Begin starts a request from caller with key and fingerprint. It writes the
// lock first, conditionally, and reads nothing: a new request costs one
// conditional put; for a known key the failed put returns the stored record
// (a replay costs that one call and no write), and a crashed request's
// expired lock is taken over with a second put conditional on its owner. A
// put whose response was lost and that the SDK retried finds its own lock
// and is Acquired, never "in flight" behind itself.
func (s *Store) Begin(ctx context.Context, caller, key, fingerprint string) (Result, error) {
	return s.begin(ctx, caller, key, fingerprint, false)
}

// TakeOver is Begin for a caller whose requests for one key never run at
// once (the outbox relay: a stream shard is relayed by one invocation at a
// time), so a lock it meets is a dead request's: it is taken over at once,
// not after its lockedUntil. A completed record replays and another
// fingerprint is a mismatch, as for Begin.
func (s *Store) TakeOver(ctx context.Context, caller, key, fingerprint string) (Result, error) {
	return s.begin(ctx, caller, key, fingerprint, true)
}

func (s *Store) begin(ctx context.Context, caller, key, fingerprint string, takeOver bool) (Result, error) {
	pk := PK(caller, key)
	cond := ddb.AbsentOrExpired(AttrPK, s.now())
	for range maxBeginAttempts {
		now := s.now()
		lock := Lock{PK: pk, Owner: newOwner(), Fingerprint: fingerprint, LockedUntil: now.Add(s.lockTimeout())}
		rec := record{
			PK: pk, State: StateInProgress, Fingerprint: fingerprint, Owner: lock.Owner,
			LockedUntil: lock.LockedUntil.UnixMilli(), CreatedAt: now.UnixMilli(),
			ExpiresAt: now.Add(s.retention()).Unix(),
		}
		// Our own lock (a retried put) also passes.
		put, err := ddb.Put(s.table, rec, cond.Or(expression.Name(AttrOwner).Equal(expression.Value(lock.Owner))), true)
		if err != nil {
			return Result{}, fmt.Errorf("idempotency: %w", err)
		}
		_, err = s.client.PutItem(ctx, ddb.PutInput(put))
		if err == nil {
			return Result{Outcome: Acquired, Lock: lock}, nil
		}
		if !ddb.IsConditionFailed(err) {
			return Result{}, fmt.Errorf("idempotency: lock %s: %w", pk, err)
		}
		var old record
		ok, derr := ddb.DecodeLive(ddb.OldItem(err), now, &old)
		if derr != nil {
			return Result{}, fmt.Errorf("idempotency: %w", derr)
		}
		if !ok && ddb.OldItem(err) == nil { // not returned: read it
			if ok, err = ddb.GetLive(ctx, s.client, s.table, keyAV(pk), now, &old); err != nil {
				return Result{}, fmt.Errorf("idempotency: get %s: %w", pk, err)
			}
		}
		if !ok { // gone meanwhile: try again
			cond = ddb.AbsentOrExpired(AttrPK, now)
			continue
		}
		if r, decided := s.decide(old, fingerprint, now); decided && !(takeOver && r.Outcome == InFlight) {
			return r, nil
		}
		// A crashed request's lock expired: take over from that owner.
		cond = expression.Name(AttrOwner).Equal(expression.Value(old.Owner)).
			And(expression.Name(AttrState).Equal(expression.Value(StateInProgress)))
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

// ownerCond holds while lock's owner holds the record: in progress, or
// completed by this very owner (a completion retried after a lost response).
func ownerCond(lock Lock) expression.ConditionBuilder {
	return expression.Name(AttrOwner).Equal(expression.Value(lock.Owner))
}

// Complete stores resp as the response of the request holding lock,
// conditional on lock still being held. The caller must not complete with a
// 5xx response (Release instead). with are writes to commit atomically with
// the completion (one TransactWriteItems instead of a PutItem); when one of
// them fails its condition nothing is written and the error matches
// ErrCompanionFailed. A lost lock returns ErrLockLost.
func (s *Store) Complete(ctx context.Context, lock Lock, resp Response, with ...Companion) error {
	now := s.now()
	rec := record{
		PK: lock.PK, State: StateCompleted, Fingerprint: lock.Fingerprint, Owner: lock.Owner, Response: resp,
		CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(s.retention()).Unix(),
	}
	if resp.KeepUntil.Unix() > rec.ExpiresAt {
		rec.ExpiresAt = resp.KeepUntil.Unix()
	}
	put, err := ddb.Put(s.table, rec, ownerCond(lock), false)
	if err != nil {
		return fmt.Errorf("idempotency: %w", err)
	}
	if len(with) == 0 {
		_, err = s.client.PutItem(ctx, ddb.PutInput(put))
		if ddb.IsConditionFailed(err) {
			return fmt.Errorf("idempotency: complete %s: %w", lock.PK, ErrLockLost)
		}
		if err != nil {
			return fmt.Errorf("idempotency: complete %s: %w", lock.PK, err)
		}
		return nil
	}
	items := make([]types.TransactWriteItem, 0, len(with)+1)
	for _, c := range with {
		it, err := c.TransactItem()
		if err != nil {
			return fmt.Errorf("idempotency: complete %s: %w", lock.PK, err)
		}
		items = append(items, it)
	}
	items = append(items, types.TransactWriteItem{Put: put})
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch {
	case err == nil:
		return nil
	case !ddb.IsConditionFailed(err):
		return fmt.Errorf("idempotency: complete %s: %w", lock.PK, err)
	}
	if _, own := ddb.ItemAt(err, len(with)); own {
		return fmt.Errorf("idempotency: complete %s: %w", lock.PK, ErrLockLost)
	}
	return fmt.Errorf("idempotency: complete %s: %w: %w", lock.PK, ErrCompanionFailed, err)
}

// Release gives up the lock without storing a response (validation failures
// never get here; 5xx responses and requests that must stay retryable do), so
// the key can be used again at once. A lock already lost is not an error.
func (s *Store) Release(ctx context.Context, lock Lock) error {
	in, err := ddb.DeleteInput(s.table, keyAV(lock.PK), ownerCond(lock).
		And(expression.Name(AttrState).Equal(expression.Value(StateInProgress))))
	if err != nil {
		return fmt.Errorf("idempotency: release: %w", err)
	}
	if _, err = s.client.DeleteItem(ctx, in); err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("idempotency: release %s: %w", lock.PK, err)
	}
	return nil
}

func newOwner() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}
