package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/marker"
)

// DynamoAPI is the part of the DynamoDB client the store uses.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// MarkerPeeker reads a job's effect marker; *marker.Dynamo is one.
type MarkerPeeker interface {
	Peek(ctx context.Context, k marker.Key) (marker.Record, bool, error)
}

// Attribute names of the jobs table.
const (
	AttrPK        = "pk"
	AttrState     = "state"
	AttrJobID     = "jobId"
	AttrExpiresAt = "expiresAt"
)

// JobPK returns the table key of a job record.
func JobPK(jobID string) string { return "job#" + jobID }

// DedupPK returns the table key of the dedup pointer of (caller, type, key).
// The caller is escaped so that a '#' in it cannot make two different triples
// share a key (the type has none, the key comes last).
func DedupPK(caller, jobType, key string) string {
	return "dedup#" + EscapeCaller(caller) + "#" + jobType + "#" + key
}

// EscapeCaller percent-encodes '%' and '#' in a caller, so it can be one
// '#'-separated part of a table key.
func EscapeCaller(caller string) string {
	return strings.NewReplacer("%", "%25", "#", "%23").Replace(caller)
}

// Store is the jobs table. Its zero value is not usable; call NewStore.
type Store struct {
	client  DynamoAPI
	table   string
	markers MarkerPeeker
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// PendingTimeout is how long a Pending job belongs to the request that
	// reserved it (DefaultPendingTimeout if 0).
	PendingTimeout time.Duration
}

// NewStore returns the store on table. markers reads the effect markers the
// derived states come from; nil means no marker is ever found.
func NewStore(client DynamoAPI, table string, markers MarkerPeeker) *Store {
	return &Store{client: client, table: table, markers: markers}
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) pendingTimeout() time.Duration {
	if s.PendingTimeout > 0 {
		return s.PendingTimeout
	}
	return DefaultPendingTimeout
}

// record is a job record as stored.
type record struct {
	PK             string `dynamodbav:"pk"`
	JobID          string `dynamodbav:"jobId"`
	Caller         string `dynamodbav:"caller"`
	Type           string `dynamodbav:"type"`
	Key            string `dynamodbav:"key"`
	State          State  `dynamodbav:"state"`
	Queue          string `dynamodbav:"queue"`
	CorrelationID  string `dynamodbav:"correlationId"`
	Message        string `dynamodbav:"message"`
	Attempts       int    `dynamodbav:"attempts"`
	LastErrorClass string `dynamodbav:"lastErrorClass,omitempty"`
	CreatedAt      int64  `dynamodbav:"createdAt"` // epoch milliseconds
	UpdatedAt      int64  `dynamodbav:"updatedAt"`
	RunAt          int64  `dynamodbav:"runAt"`
	FailedAt       int64  `dynamodbav:"failedAt,omitempty"`
	ExpiresAt      int64  `dynamodbav:"expiresAt"` // epoch seconds (TTL)
}

// pointer is a dedup pointer as stored.
type pointer struct {
	PK        string `dynamodbav:"pk"`
	JobID     string `dynamodbav:"jobId"`
	ExpiresAt int64  `dynamodbav:"expiresAt"`
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// initialExpiry is the TTL of a record that is not yet terminal: it can stay
// active at most until QueueRetention after its run time, and then is kept
// TerminalRetention like any terminal record.
func initialExpiry(runAt time.Time) int64 {
	return runAt.Add(QueueRetention + TerminalRetention).Unix()
}

func toRecord(j Job) record {
	r := record{
		PK: JobPK(j.ID), JobID: j.ID, Caller: j.Caller, Type: j.Type, Key: j.Key, State: j.stored,
		Queue: j.Queue, CorrelationID: j.CorrelationID, Message: j.Message, Attempts: j.Attempts,
		LastErrorClass: j.LastErrorClass, CreatedAt: ms(j.CreatedAt), UpdatedAt: ms(j.UpdatedAt),
		RunAt: ms(j.RunAt), ExpiresAt: initialExpiry(j.RunAt),
	}
	if j.FailedAt != nil {
		r.FailedAt = ms(*j.FailedAt)
	}
	return r
}

func (r record) job() Job {
	j := Job{
		ID: r.JobID, Caller: r.Caller, Type: r.Type, Key: r.Key, State: r.State, stored: r.State,
		Queue: r.Queue, CorrelationID: r.CorrelationID, Message: r.Message, Attempts: r.Attempts,
		LastErrorClass: r.LastErrorClass, CreatedAt: fromMS(r.CreatedAt), UpdatedAt: fromMS(r.UpdatedAt),
		RunAt: fromMS(r.RunAt),
	}
	if r.FailedAt != 0 {
		t := fromMS(r.FailedAt)
		j.FailedAt = &t
	}
	return j
}

func keyAV(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

// getItem reads one item with a consistent read into out; ok is false when
// there is none or it has expired (TTL deletion is never trusted).
func (s *Store) getItem(ctx context.Context, pk string, out any) (bool, error) {
	res, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyAV(pk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("jobs: get %s: %w", pk, err)
	}
	return s.decodeLive(res.Item, out)
}

func (s *Store) decodeLive(item map[string]types.AttributeValue, out any) (bool, error) {
	if len(item) == 0 {
		return false, nil
	}
	var exp struct {
		ExpiresAt int64 `dynamodbav:"expiresAt"`
	}
	if err := attributevalue.UnmarshalMap(item, &exp); err != nil {
		return false, fmt.Errorf("jobs: decode: %w", err)
	}
	if ddb.Expired(exp.ExpiresAt, s.now()) {
		return false, nil
	}
	if err := attributevalue.UnmarshalMap(item, out); err != nil {
		return false, fmt.Errorf("jobs: decode: %w", err)
	}
	return true, nil
}

// Get returns the job with its derived state: the record (consistent read)
// combined with a peek of its effect marker. A missing or expired record is
// ErrNotFound. Get does not check the caller; the HTTP layer compares
// Job.Caller with the requester.
func (s *Store) Get(ctx context.Context, jobID string) (Job, error) {
	var r record
	ok, err := s.getItem(ctx, JobPK(jobID), &r)
	if err != nil {
		return Job{}, err
	}
	if !ok {
		return Job{}, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	return s.derive(ctx, r.job())
}

// derive fills j.State from its stored state and its marker.
func (s *Store) derive(ctx context.Context, j Job) (Job, error) {
	var (
		m   marker.Record
		has bool
	)
	// Failed records are peeked too: a redriven job that then succeeded is
	// Succeeded, whatever the record says.
	if s.markers != nil {
		var err error
		if m, has, err = s.markers.Peek(ctx, j.MarkerKey()); err != nil {
			return Job{}, fmt.Errorf("jobs: derive state of %s: %w", j.ID, err)
		}
	}
	j.State = Derive(j.stored, j.RunAt, m, has, s.now())
	if has && j.Attempts == 0 {
		j.Attempts = 1
	}
	return j, nil
}

// MarkFailed records that job jobID failed with the given error class (a
// short name such as "permanent" or "max-receives"; it is sanitized and
// truncated). It is conditional and idempotent: it never overwrites a
// terminal record, and marking an already Failed job again returns nil. A
// job that does not exist (or whose record expired) returns an error matching
// ErrNotFound, which a dead-letter consumer may treat as done.
func (s *Store) MarkFailed(ctx context.Context, jobID, errorClass string) error {
	return s.MarkFailedAfter(ctx, jobID, errorClass, 0)
}

// MarkFailedAfter is MarkFailed that also records the number of delivery
// attempts (attempts ≤ 0 leaves it as it is).
func (s *Store) MarkFailedAfter(ctx context.Context, jobID, errorClass string, attempts int) error {
	now := s.now()
	upd := expression.Set(expression.Name(AttrState), expression.Value(StateFailed)).
		Set(expression.Name("lastErrorClass"), expression.Value(cleanErrorClass(errorClass))).
		Set(expression.Name("failedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(now.Add(TerminalRetention).Unix()))
	if attempts > 0 {
		upd = upd.Set(expression.Name("attempts"), expression.Value(attempts))
	}
	cond := expression.AttributeExists(expression.Name(AttrPK)).
		And(expression.Name(AttrExpiresAt).GreaterThan(expression.Value(now.Unix()))).
		And(expression.Name(AttrState).NotEqual(expression.Value(StateFailed)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("jobs: mark failed: %w", err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyAV(JobPK(jobID)),
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	if !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: mark %s failed: %w", jobID, err)
	}
	// ALL_OLD returns the item that failed the condition; no item means
	// there is none (no extra read, and no GetItem permission needed).
	var r record
	ok, derr := s.decodeLive(ddb.OldItem(err), &r)
	switch {
	case derr != nil:
		return derr
	case !ok:
		return fmt.Errorf("%w: %s", ErrNotFound, jobID)
	case r.State == StateFailed:
		return nil // already marked: idempotent
	}
	return fmt.Errorf("jobs: mark %s failed: record changed concurrently: %w", jobID, err)
}

// cleanErrorClass keeps an error class short and printable: it is stored and
// shown to the caller.
func cleanErrorClass(s string) string {
	const limit = 64
	s = strings.Map(func(r rune) rune {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, s)
	if len(s) > limit {
		s = s[:limit]
	}
	if s == "" {
		return "unknown"
	}
	return s
}

// maxReserveAttempts bounds the read-decide-write loop of Reserve under
// contention.
const maxReserveAttempts = 3

// Reserve decides what an enqueue of job under policy does, and when a new job
// is due, reserves it: one transaction writes the Pending record and points
// the dedup pointer at it, conditional on the pointer being what the decision
// read, so two concurrent enqueues can never both create a job. job must
// carry ID, Caller, Type, Key, Queue, CorrelationID, Message, CreatedAt and
// RunAt (CreatedAt plus the delay); Reserve sets its state. See Outcome for
// what the caller does next.
func (s *Store) Reserve(ctx context.Context, job Job, policy DuplicatePolicy) (Decision, error) {
	job.stored, job.State = StatePending, StatePending
	job.CreatedAt = job.CreatedAt.UTC().Truncate(time.Millisecond)
	job.RunAt = job.RunAt.UTC().Truncate(time.Millisecond)
	job.UpdatedAt = job.CreatedAt
	ppk := DedupPK(job.Caller, job.Type, job.Key)
	for range maxReserveAttempts {
		var p pointer
		hasPtr, err := s.getItem(ctx, ppk, &p)
		if err != nil {
			return Decision{}, err
		}
		prevID := ""
		if hasPtr {
			prev, found, err := s.find(ctx, p.JobID)
			if err != nil {
				return Decision{}, err
			}
			if found {
				if d, decided := s.decide(prev, job, policy); decided {
					return d, nil
				}
			}
			prevID = p.JobID
		}
		err = s.reserve(ctx, job, ppk, prevID)
		if err == nil {
			return Decision{Outcome: Reserved, Job: job, Own: true}, nil
		}
		if !ddb.IsConditionFailed(err) {
			return Decision{}, err
		}
	}
	// Still contended. The request's own job may exist under another pointer
	// (an Idempotency-Key reused after its record expired).
	own, found, err := s.find(ctx, job.ID)
	if err != nil {
		return Decision{}, err
	}
	if found {
		if own.State == StatePending {
			return Decision{Outcome: Resume, Job: own, Own: true}, nil
		}
		return Decision{Outcome: Duplicate, Job: own, Own: true}, nil
	}
	return Decision{Outcome: Busy, RetryAfter: time.Second}, nil
}

// find reads a job with its derived state; found is false when it does not
// exist or has expired.
func (s *Store) find(ctx context.Context, jobID string) (Job, bool, error) {
	j, err := s.Get(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		return Job{}, false, nil
	}
	return j, err == nil, err
}

// decide returns the decision when the key's last job prev settles it, or
// decided=false when a new job may be reserved.
func (s *Store) decide(prev, job Job, policy DuplicatePolicy) (d Decision, decided bool) {
	own := prev.ID == job.ID
	switch {
	case prev.State == StatePending:
		if wait := prev.UpdatedAt.Add(s.pendingTimeout()).Sub(s.now()); !own && wait > 0 {
			return Decision{Outcome: Busy, Job: prev, RetryAfter: wait}, true
		}
		return Decision{Outcome: Resume, Job: prev, Own: own}, true
	case own, prev.State.Active():
		return Decision{Outcome: Duplicate, Job: prev, Own: own}, true
	case !policy.Allows(prev.State):
		return Decision{Outcome: Rejected, Job: prev}, true
	}
	return Decision{}, false
}

// reserve writes the Pending record and the pointer in one transaction. The
// pointer must be absent (or expired) when prevID is "", else still point at
// prevID; the record must not exist (or be expired).
func (s *Store) reserve(ctx context.Context, job Job, ppk, prevID string) error {
	now := s.now()
	rec, err := attributevalue.MarshalMap(toRecord(job))
	if err != nil {
		return fmt.Errorf("jobs: encode record: %w", err)
	}
	ptr, err := attributevalue.MarshalMap(pointer{PK: ppk, JobID: job.ID, ExpiresAt: initialExpiry(job.RunAt)})
	if err != nil {
		return fmt.Errorf("jobs: encode pointer: %w", err)
	}
	ptrCond := absentOrExpired(now)
	if prevID != "" {
		ptrCond = expression.Name(AttrJobID).Equal(expression.Value(prevID))
	}
	ptrPut, err := s.put(ptr, ptrCond)
	if err != nil {
		return err
	}
	recPut, err := s.put(rec, absentOrExpired(now))
	if err != nil {
		return err
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Put: ptrPut}, {Put: recPut}},
	})
	if err != nil {
		return fmt.Errorf("jobs: reserve %s: %w", job.ID, err)
	}
	return nil
}

func absentOrExpired(now time.Time) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(AttrPK)).
		Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix())))
}

func (s *Store) put(item map[string]types.AttributeValue, cond expression.ConditionBuilder) (*types.Put, error) {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("jobs: condition: %w", err)
	}
	return &types.Put{
		TableName: aws.String(s.table), Item: item, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// PromoteItem returns the transaction item that moves job from Pending to
// its queued state (Enqueued, or Scheduled with a delay) once SQS accepted its
// message, so the caller can commit it together with its own write (the
// request layer's completion). It is conditional on the record existing and
// not being Failed; promoting an already promoted job is harmless.
func (s *Store) PromoteItem(job Job) (types.TransactWriteItem, error) {
	now := s.now()
	upd := expression.Set(expression.Name(AttrState), expression.Value(job.QueuedState())).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli()))
	cond := expression.AttributeExists(expression.Name(AttrPK)).
		And(expression.Name(AttrState).In(expression.Value(StatePending), expression.Value(StateEnqueued), expression.Value(StateScheduled)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("jobs: promote: %w", err)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: keyAV(JobPK(job.ID)), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}, nil
}

// Promote is PromoteItem on its own. A job that is already Failed (or gone)
// is left as it is and returns nil: its message was sent, the record already
// tells a later story.
func (s *Store) Promote(ctx context.Context, job Job) error {
	it, err := s.PromoteItem(job)
	if err != nil {
		return err
	}
	u := it.Update
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
	})
	if err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: promote %s: %w", job.ID, err)
	}
	return nil
}
