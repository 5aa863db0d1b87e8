package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/ddb"
)

// StateFailed is a record Keys.Fail wrote: an engine.Store's FAILED marker
// (the API writes none).
const StateFailed State = "FAILED"

// AttrResult is the attribute of a result a generic claim keeps (Keys.Claim
// of a key no request holds: the API's answers are kept as status, headers
// and body).
const AttrResult = "result"

// callerSep separates the caller from the Idempotency-Key in the JobID of an
// API key (KeyOf): no caller or key holds it.
const callerSep = "\x00"

// KeyOf is the engine.Key of caller's Idempotency-Key key under name, the
// one engine/idempotencykey's middleware names it with (its Options.Caller
// scope, a NUL, the key): Keys of name stores it under PK(caller, key), so
// the records the middleware reads are the ones Begin and Complete write.
func KeyOf(name, caller, key string) engine.Key {
	return engine.Key{Type: name, JobID: caller + callerSep + key}
}

// Keys is the idempotency-keys table as an engine.Store: the store
// engine.Do, and so engine/idempotencykey's middleware, runs on. A lease is
// the IN_PROGRESS record Begin writes (owner, lockedUntil, fingerprint), a
// claim the COMPLETED one, a release the owner-conditioned delete, all on
// the same items as Begin, Complete and Release, so the two views of the
// table work together (a rolling deploy, the relay's TakeOver). A COMPLETED
// record the API kept (status, headers and body) reads as the result the
// middleware keeps a response as, so it is replayed byte for byte. Call
// Store.Keys.
type Keys struct {
	s    *Store
	name string
}

// Keys returns the table as an engine.Store whose keys of name are
// requests (KeyOf), every other key a marker of its own.
func (s *Store) Keys(name string) engine.Store { return &Keys{s: s, name: name} }

// pk is the record key of k: PK(caller, key) for a request of the API's
// name, else one no request's PK can be (an escaped caller never holds a
// "%" that is not an escape).
func (k *Keys) pk(key engine.Key) string {
	if caller, idem, ok := strings.Cut(key.JobID, callerSep); ok && key.Type == k.name {
		return PK(caller, idem)
	}
	return "%:" + ddb.EscapeKeyPart(key.Type) + "#" + key.JobID
}

// httpResponse is a response as engine/idempotencykey keeps it (its
// result's JSON): a record the API completed reads as one.
type httpResponse struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

// keyRecord is a stored request with a generic result.
type keyRecord struct {
	record
	Result []byte `dynamodbav:"result,omitempty"`
}

// decode is the marker of k that item is; ok is false for none or an
// expired one.
func (k *Keys) decode(key engine.Key, item map[string]types.AttributeValue, now time.Time) (engine.Record, bool, error) {
	var rec keyRecord
	ok, err := ddb.DecodeLive(item, now, &rec)
	if !ok || err != nil {
		return engine.Record{}, false, err
	}
	r := engine.Record{Key: key, Owner: rec.Owner, Fingerprint: rec.Fingerprint, ExpiresAt: time.Unix(rec.ExpiresAt, 0)}
	switch rec.State {
	case StateInProgress:
		r.State, r.LeaseUntil, r.LeasedAt = engine.StateLeased, time.UnixMilli(rec.LockedUntil), time.UnixMilli(rec.CreatedAt)
	case StateFailed:
		r.State, r.ProcessedAt = engine.StateFailed, time.UnixMilli(rec.CreatedAt)
	default:
		r.State, r.ProcessedAt, r.Result = engine.StateDone, time.UnixMilli(rec.CreatedAt), rec.Result
		if r.Result == nil && rec.Status != 0 {
			if r.Result, err = json.Marshal(answerOf(rec.Response)); err != nil {
				return engine.Record{}, false, fmt.Errorf("idempotency: the answer of %s: %w", rec.PK, err)
			}
		}
	}
	return r, true, nil
}

// answerOf is the API's stored answer as the middleware's result.
func answerOf(resp Response) httpResponse {
	a := httpResponse{Status: resp.Status, Body: []byte(resp.Body)}
	if len(resp.Headers) > 0 {
		a.Header = make(map[string][]string, len(resp.Headers))
		for h, v := range resp.Headers {
			a.Header[h] = []string{v}
		}
	}
	return a
}

// PeekBatch reads the records of keys, one consistent GetItem each.
func (k *Keys) PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	found := make(map[engine.Key]engine.Record, len(keys))
	for _, key := range keys {
		if _, seen := found[key]; seen {
			continue
		}
		r, ok, err := k.get(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok {
			found[key] = r
		}
	}
	return found, nil
}

func (k *Keys) get(ctx context.Context, key engine.Key) (engine.Record, bool, error) {
	pk := k.pk(key)
	out, err := k.s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(k.s.table), Key: keyAV(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return engine.Record{}, false, fmt.Errorf("idempotency: get %s: %w", pk, err)
	}
	return k.decode(key, out.Item, k.s.now())
}

func stateIs(s State) expression.ConditionBuilder {
	return expression.Name(AttrState).Equal(expression.Value(s))
}

func ownedBy(owner string) expression.ConditionBuilder {
	return expression.Name(AttrOwner).Equal(expression.Value(owner))
}

// expired holds for a lease whose lockedUntil has passed at now.
func expired(now time.Time) expression.ConditionBuilder {
	return stateIs(StateInProgress).And(expression.Name(AttrLockedUntil).LessThanEqual(expression.Value(now.UnixMilli())))
}

// Lease writes the IN_PROGRESS record of key for m.Owner until m.Until,
// with m.Fingerprint, in one conditional put: it succeeds when there is no
// live record, when the owner holds it already (a retried put), or when
// the lease on it has expired and was taken with the same fingerprint (a
// crashed request's: another request's key stays refused, 422, while its
// dead lease lies there). Otherwise it returns the record found with
// ErrProcessed (COMPLETED), ErrFailed or ErrLeaseHeld: the failed put
// returns it, so a replay costs this one call.
func (k *Keys) Lease(ctx context.Context, key engine.Key, m engine.Mark) (engine.Record, error) {
	pk := k.pk(key)
	takeOver := expired(k.s.now())
	if m.Fingerprint != "" {
		takeOver = takeOver.And(expression.Name(AttrFingerprint).Equal(expression.Value(m.Fingerprint)))
	}
	for range maxBeginAttempts {
		now := k.s.now()
		until := m.Until
		if until.IsZero() {
			until = now.Add(k.s.lockTimeout())
		}
		rec := keyRecord{record: record{
			PK: pk, State: StateInProgress, Fingerprint: m.Fingerprint, Owner: m.Owner, LockedUntil: until.UnixMilli(),
			CreatedAt: now.UnixMilli(), ExpiresAt: k.expiry(m.Expires, until),
		}}
		cond := ddb.AbsentOrExpired(AttrPK, now).Or(stateIs(StateInProgress).And(ownedBy(m.Owner))).Or(takeOver)
		old, failed, err := k.put(ctx, key, rec, cond)
		switch {
		case err != nil:
			return engine.Record{}, fmt.Errorf("idempotency: lease %s: %w", pk, err)
		case !failed:
			return engine.Record{
				Key: key, State: engine.StateLeased, Owner: m.Owner, LeaseUntil: time.UnixMilli(rec.LockedUntil),
				LeasedAt: time.UnixMilli(rec.CreatedAt), ExpiresAt: time.Unix(rec.ExpiresAt, 0), Fingerprint: m.Fingerprint,
			}, nil
		case old.State != "": // live: its conflict
			return old, old.Conflict()
		}
		// Gone or expired between the put and its answer: put again.
	}
	// Still contended: in flight, for a second (as Begin answers then).
	busy := engine.Record{Key: key, State: engine.StateLeased, LeaseUntil: k.s.now().Add(time.Second), Fingerprint: m.Fingerprint}
	return busy, fmt.Errorf("idempotency: lease %s: %w", pk, engine.ErrLeaseHeld)
}

// Claim writes key COMPLETED with m.Fingerprint and m.Result until
// m.Expires. With m.Owner "" it is a plain conditional put (no live
// record); with an owner it completes that owner's lease, and a claim
// retried after its response was lost finds its own record and wins. A
// record already settled is (false, nil); another owner's lease is
// ErrLeaseLost.
func (k *Keys) Claim(ctx context.Context, key engine.Key, m engine.Mark) (bool, error) {
	now := k.s.now()
	pk := k.pk(key)
	cond := ddb.AbsentOrExpired(AttrPK, now)
	owner := m.Owner
	if owner == "" {
		owner = "claim:" + newOwner()
	} else {
		cond = cond.Or(stateIs(StateInProgress).And(ownedBy(owner)))
	}
	rec := keyRecord{record: record{
		PK: pk, State: StateCompleted, Fingerprint: m.Fingerprint, Owner: owner,
		CreatedAt: now.UnixMilli(), ExpiresAt: k.expiry(m.Expires, now),
	}, Result: m.Result}
	old, failed, err := k.put(ctx, key, rec, cond)
	switch {
	case err != nil:
		return false, fmt.Errorf("idempotency: claim %s: %w", pk, err)
	case !failed:
		return true, nil
	case old.State == engine.StateDone && old.Owner == owner:
		return true, nil // this very claim, retried after its response was lost
	case old.Settled():
		return false, nil
	}
	return false, fmt.Errorf("idempotency: claim %s: %w", pk, engine.ErrLeaseLost)
}

// Fail writes key FAILED until m.Expires: with an owner over that owner's
// lease or claim, without one over no live record or an expired lease; a
// FAILED record is success. Anything else is ErrLeaseLost.
func (k *Keys) Fail(ctx context.Context, key engine.Key, m engine.Mark) error {
	now := k.s.now()
	pk := k.pk(key)
	cond := ddb.AbsentOrExpired(AttrPK, now).Or(expired(now))
	if m.Owner != "" {
		cond = ownedBy(m.Owner).And(expression.Or(stateIs(StateInProgress), stateIs(StateCompleted)))
	}
	rec := keyRecord{record: record{
		PK: pk, State: StateFailed, Fingerprint: m.Fingerprint, Owner: m.Owner,
		CreatedAt: now.UnixMilli(), ExpiresAt: k.expiry(m.Expires, now),
	}}
	_, failed, err := k.put(ctx, key, rec, cond.Or(stateIs(StateFailed)))
	switch {
	case err != nil:
		return fmt.Errorf("idempotency: fail %s: %w", pk, err)
	case failed:
		return fmt.Errorf("idempotency: fail %s: %w", pk, engine.ErrLeaseLost)
	}
	return nil
}

// Release deletes key's record while owner holds its lease: the key is
// free at once. A lease already lost (or a record settled) is left alone
// and is no error.
func (k *Keys) Release(ctx context.Context, key engine.Key, owner string) error {
	pk := k.pk(key)
	in, err := ddb.DeleteInput(k.s.table, keyAV(pk), ownedBy(owner).And(stateIs(StateInProgress)))
	if err != nil {
		return fmt.Errorf("idempotency: release: %w", err)
	}
	if _, err = k.s.client.DeleteItem(ctx, in); err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("idempotency: release %s: %w", pk, err)
	}
	return nil
}

// expiry is m's expiry, else the store's retention from from.
func (k *Keys) expiry(expires, from time.Time) int64 {
	if expires.IsZero() {
		return from.Add(k.s.retention()).Unix()
	}
	return expires.Unix()
}

// put writes rec under cond. failed reports a failed condition, with the
// live record that failed it (State "" when there is none: it was deleted
// or expired meanwhile).
func (k *Keys) put(ctx context.Context, key engine.Key, rec keyRecord, cond expression.ConditionBuilder) (engine.Record, bool, error) {
	put, err := ddb.Put(k.s.table, rec, cond, true)
	if err != nil {
		return engine.Record{}, false, err
	}
	_, err = k.s.client.PutItem(ctx, ddb.PutInput(put))
	if !ddb.IsConditionFailed(err) {
		return engine.Record{}, false, err
	}
	now := k.s.now()
	if item := ddb.OldItem(err); item != nil {
		old, _, err := k.decode(key, item, now)
		return old, true, err
	}
	old, _, err := k.get(ctx, key) // not returned: read it
	return old, true, err
}

var _ engine.Store = (*Keys)(nil)
