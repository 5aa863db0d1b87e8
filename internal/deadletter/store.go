// Package deadletter is the dead-letter use case of runstwice: the consumer
// of the dead-letter queue (store every dead letter once, mark its job
// Failed, count and alert) and the redrive that sends a stored envelope back
// to its type's queue under the same messageId, which is safe because the
// effect marker absorbs anything already done.
//
// The dead-letters table is keyed by `pk`: the envelope's messageId when the
// body decodes as an envelope, else the SQS message id. Items live 30 days
// after they were last seen (TTL on expiresAt).
package deadletter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/ddb"
)

// Attribute names of the dead-letters table. PK is the hash key.
const (
	AttrPK            = "pk"
	AttrSQSMessageIDs = "sqsMessageIds"
	AttrStatus        = "status"
	AttrExpiresAt     = "expiresAt"
)

// DefaultRetention is how long a dead letter is kept after it was last seen.
const DefaultRetention = 30 * 24 * time.Hour

// Status is what became of a dead letter.
type Status string

// The statuses of a dead letter.
const (
	// StatusDead: the message failed and waits for a person (or a redrive).
	StatusDead Status = "dead"
	// StatusSucceeded: the message reached the DLQ although its marker says
	// the job had already succeeded (e.g. a twin finished it while this
	// delivery kept finding the lease held). It is not a dead letter.
	StatusSucceeded Status = "succeeded"
	// StatusRedriven: the envelope was sent back to its queue.
	StatusRedriven Status = "redriven"
	// StatusDropped: a person decided it is not worth redriving; the record
	// (and its reason) stays until it expires, and its job reads Failed.
	StatusDropped Status = "dropped"
)

// Statuses lists every status.
var Statuses = []Status{StatusDead, StatusSucceeded, StatusRedriven, StatusDropped}

// Record is a stored dead letter.
type Record struct {
	// ID is the key: the envelope's messageId (the job id; for a tick, the
	// job id the worker derives from it), or the SQS message id when the
	// body is neither.
	ID string `dynamodbav:"pk" json:"id"`
	// JobID is the envelope's messageId, "" when the body did not decode.
	JobID string `dynamodbav:"jobId,omitempty" json:"jobId,omitempty"`
	// Type is the envelope's type if registered, else "unknown".
	Type          string `dynamodbav:"type" json:"type"`
	CorrelationID string `dynamodbav:"correlationId,omitempty" json:"correlationId,omitempty"`
	// Body is the raw SQS body, whatever it holds, whole unless
	// BodyTruncated.
	Body string `dynamodbav:"body" json:"body"`
	// BodyTruncated says Body is only part of the message's body (Fit): the
	// letter cannot be redriven as it is.
	BodyTruncated bool `dynamodbav:"bodyTruncated,omitempty" json:"bodyTruncated,omitempty"`
	// BodyBytes is the size of the whole body of a BodyTruncated letter, 0
	// when unknown (or the body is whole).
	BodyBytes int `dynamodbav:"bodyBytes,omitempty" json:"bodyBytes,omitempty"`
	// Reason says why the message is here: the worker's reason attribute,
	// "exceeded maxReceiveCount (N receives)" for a redrive move, or
	// EventBridge Scheduler's error code and retries for a message it could
	// not deliver ("EventBridge Scheduler could not deliver it to its
	// queue: …"; never its ERROR_MESSAGE).
	Reason string `dynamodbav:"reason" json:"reason"`
	// SourceQueue is the ARN (or, failing that, the name) of the queue the
	// message came from, "" when unknown. For a letter of EventBridge
	// Scheduler it is the queue the scheduler could not deliver to.
	SourceQueue string `dynamodbav:"sourceQueue,omitempty" json:"sourceQueue,omitempty"`
	// Schedule names the schedule of a recurring schedule's tick (its
	// schedule field), or the schedule EventBridge Scheduler could not
	// deliver (from its ARN), "" otherwise.
	Schedule string `dynamodbav:"schedule,omitempty" json:"schedule,omitempty"`
	// ReceiveCount is how often the job was tried: its receives before it
	// was dead-lettered, or for a letter of EventBridge Scheduler its
	// delivery tries (RETRY_ATTEMPTS + 1).
	ReceiveCount int    `dynamodbav:"receiveCount" json:"receiveCount"`
	Status       Status `dynamodbav:"status" json:"status"`
	// Occurrences counts distinct DLQ deliveries recorded under this ID (a
	// redriven message that fails again is a second occurrence).
	Occurrences int `dynamodbav:"occurrences" json:"occurrences"`
	// SQSMessageIDs are the DLQ message ids recorded, which make a second run
	// of the consumer on the same delivery a no-op.
	SQSMessageIDs []string  `dynamodbav:"sqsMessageIds,stringset,omitempty" json:"sqsMessageIds,omitempty"`
	FirstSeen     time.Time `dynamodbav:"firstSeen" json:"firstSeen"`
	LastSeen      time.Time `dynamodbav:"lastSeen" json:"lastSeen"`
	RedrivenAt    time.Time `dynamodbav:"redrivenAt,omitempty" json:"redrivenAt,omitzero"`
	Redrives      int       `dynamodbav:"redrives,omitempty" json:"redrives,omitempty"`
	DroppedAt     time.Time `dynamodbav:"droppedAt,omitempty" json:"droppedAt,omitzero"`
	ExpiresAt     int64     `dynamodbav:"expiresAt" json:"-"`
	// TraceHeader is the AWSTraceHeader the message carried (its job's
	// trace, X-Ray form), "" for none: a redrive sends it again, so the
	// redriven job stays in its trace.
	TraceHeader string `dynamodbav:"traceHeader,omitempty" json:"traceHeader,omitempty"`
}

// ErrNotFound is returned (wrapped) for a dead letter that does not exist or
// has expired.
var ErrNotFound = errors.New("deadletter: not found")

// ErrNotDead is returned (wrapped) by MarkDropped for a letter that is no
// longer waiting for a person (redriven, succeeded or already dropped).
var ErrNotDead = errors.New("deadletter: not a dead letter any more")

// DynamoAPI is the part of the DynamoDB client the store uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Store is the dead-letters table.
type Store struct {
	client DynamoAPI
	table  string
	// Retention is how long a record lives after it was last seen
	// (DefaultRetention if 0).
	Retention time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Markers, when set, settles what Select returns: a redriven letter
	// whose job has since run reads StatusSucceeded (Settle).
	Markers BatchPeeker
}

// NewStore returns the store on table.
func NewStore(client DynamoAPI, table string) *Store { return &Store{client: client, table: table} }

func (s *Store) now() time.Time { return ddb.Now(s.Now) }

func (s *Store) retention() time.Duration { return ddb.DurationOr(s.Retention, DefaultRetention) }

func pkAV(id string) map[string]types.AttributeValue { return ddb.KeyS(AttrPK, id) }

// Save records one DLQ delivery of rec, identified by its SQS message id, in
// one conditional UpdateItem: the first delivery creates the item, a new
// delivery under the same ID (a redriven message that failed again) updates
// it and keeps firstSeen, and a delivery already recorded (the consumer
// running twice) changes nothing. isNew reports whether this call recorded
// the delivery.
func (s *Store) Save(ctx context.Context, rec Record, sqsMessageID string) (isNew bool, err error) {
	saved, err := s.SaveDelivery(ctx, rec, sqsMessageID)
	return saved.New, err
}

// Saved is what SaveDelivery did.
type Saved struct {
	// New reports whether this call recorded the delivery.
	New bool
	// Status is the letter's status after the call: rec's when New, else
	// the stored one, which tells a consumer retrying a delivery that the
	// letter was redriven (or dropped) since it first handled it.
	Status Status
}

// ErrRefused is returned (wrapped) by SaveDelivery when DynamoDB refuses
// the letter itself (a ValidationException): writing it again cannot
// succeed. A letter is never refused for its size (Fit).
var ErrRefused = errors.New("deadletter: the table refused the letter")

// SaveDelivery is Save, telling also the letter's stored status. It stores
// Fit(rec): every letter fits in the table, and one whose body was
// shortened says so (bodyTruncated, bodyBytes, its reason); a later
// delivery under the same ID with a whole body clears that.
func (s *Store) SaveDelivery(ctx context.Context, rec Record, sqsMessageID string) (Saved, error) {
	rec = Fit(rec)
	now := s.now().UTC()
	set := func(u expression.UpdateBuilder, name string, v any) expression.UpdateBuilder {
		return u.Set(expression.Name(name), expression.Value(v))
	}
	upd := expression.Set(expression.Name("type"), expression.Value(rec.Type))
	upd = set(upd, "body", rec.Body)
	upd = set(upd, "reason", rec.Reason)
	upd = set(upd, "receiveCount", rec.ReceiveCount)
	upd = set(upd, AttrStatus, string(rec.Status))
	upd = set(upd, "lastSeen", now)
	upd = set(upd, AttrExpiresAt, ddb.Epoch(now.Add(s.retention())))
	upd = upd.Set(expression.Name("firstSeen"), expression.IfNotExists(expression.Name("firstSeen"), expression.Value(now)))
	if rec.BodyTruncated {
		upd = set(upd, "bodyTruncated", true)
	} else {
		upd = upd.Remove(expression.Name("bodyTruncated"))
	}
	if rec.BodyBytes > 0 {
		upd = set(upd, "bodyBytes", rec.BodyBytes)
	} else {
		upd = upd.Remove(expression.Name("bodyBytes"))
	}
	for name, v := range map[string]string{"jobId": rec.JobID, "correlationId": rec.CorrelationID, "sourceQueue": rec.SourceQueue,
		"schedule": rec.Schedule, "traceHeader": rec.TraceHeader} {
		if v != "" {
			upd = set(upd, name, v)
		}
	}
	upd = upd.Add(expression.Name("occurrences"), expression.Value(1)).
		Add(expression.Name(AttrSQSMessageIDs), expression.Value(&types.AttributeValueMemberSS{Value: []string{sqsMessageID}}))
	cond := expression.AttributeNotExists(expression.Name(AttrPK)).
		Or(expression.Not(expression.Contains(expression.Name(AttrSQSMessageIDs), sqsMessageID)))
	u, err := ddb.Update(s.table, pkAV(rec.ID), upd, cond, true)
	if err != nil {
		return Saved{}, fmt.Errorf("deadletter: save: %w", err)
	}
	// The item that fails the condition tells a delivery recorded before
	// from this very call, applied with its response lost and retried by
	// the SDK: that one is still new (counted once).
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	switch {
	case err == nil:
		return Saved{New: true, Status: rec.Status}, nil
	case ddb.IsConditionFailed(err):
		old := ddb.OldItem(err)
		seen, _ := attributevalue.Marshal(now)
		var stored struct {
			Status Status `dynamodbav:"status"`
		}
		if err := attributevalue.UnmarshalMap(old, &stored); err != nil || stored.Status == "" {
			stored.Status = rec.Status
		}
		return Saved{New: reflect.DeepEqual(old["lastSeen"], seen), Status: stored.Status}, nil
	}
	if refused(err) {
		return Saved{}, fmt.Errorf("%w: save %s: %w", ErrRefused, rec.ID, err)
	}
	return Saved{}, fmt.Errorf("deadletter: save %s: %w", rec.ID, err)
}

// refused reports whether DynamoDB refused the request itself: a
// ValidationException, which no retry of the same write gets past.
func refused(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}

// Get reads one dead letter (consistent read).
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	var rec Record
	ok, err := ddb.GetLive(ctx, s.client, s.table, pkAV(id), s.now(), &rec)
	if err != nil {
		return Record{}, fmt.Errorf("deadletter: get %s: %w", id, err)
	}
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return rec, nil
}

// List returns every live dead letter with the given status ("" for all),
// oldest first. It scans the table, which holds only what failed.
func (s *Store) List(ctx context.Context, status Status) ([]Record, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true)}
	if status != "" {
		expr, err := expression.NewBuilder().WithFilter(expression.Name(AttrStatus).Equal(expression.Value(string(status)))).Build()
		if err != nil {
			return nil, fmt.Errorf("deadletter: list: %w", err)
		}
		in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = expr.Filter(), expr.Names(), expr.Values()
	}
	var out []Record
	p := dynamodb.NewScanPaginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("deadletter: list: %w", err)
		}
		for _, item := range page.Items {
			var rec Record
			ok, err := ddb.DecodeLive(item, s.now(), &rec)
			if err != nil {
				return nil, fmt.Errorf("deadletter: list: %w", err)
			}
			if ok {
				out = append(out, rec)
			}
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// MarkRedriven records that the dead letter id was sent back to its queue.
func (s *Store) MarkRedriven(ctx context.Context, id string) error {
	now := s.now().UTC()
	upd := expression.Set(expression.Name(AttrStatus), expression.Value(string(StatusRedriven))).
		Set(expression.Name("redrivenAt"), expression.Value(now)).
		Add(expression.Name("redrives"), expression.Value(1))
	return s.mark(ctx, id, upd, expression.AttributeExists(expression.Name(AttrPK)), "redriven")
}

// MarkDropped records that a person dropped the dead letter id: it is kept
// (reason and all) until it expires, but no longer counts as waiting. Only a
// letter in status dead can be dropped; any other returns an error matching
// ErrNotDead.
func (s *Store) MarkDropped(ctx context.Context, id string) error {
	now := s.now().UTC()
	upd := expression.Set(expression.Name(AttrStatus), expression.Value(string(StatusDropped))).
		Set(expression.Name("droppedAt"), expression.Value(now))
	// Or dropped by this very call, retried after its response was lost.
	cond := expression.AttributeExists(expression.Name(AttrPK)).
		And(expression.Name(AttrStatus).Equal(expression.Value(string(StatusDead))).
			Or(expression.Name("droppedAt").Equal(expression.Value(now))))
	err := s.mark(ctx, id, upd, cond, "dropped")
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	// The condition failed: tell a missing letter from one in another status.
	rec, gerr := s.Get(ctx, id)
	if gerr != nil {
		return gerr
	}
	return fmt.Errorf("%w: %s is %s", ErrNotDead, id, rec.Status)
}

// mark applies upd to the letter id under cond; a failed condition returns
// an error matching ErrNotFound.
func (s *Store) mark(ctx context.Context, id string, upd expression.UpdateBuilder, cond expression.ConditionBuilder, what string) error {
	u, err := ddb.Update(s.table, pkAV(id), upd, cond, false)
	if err != nil {
		return fmt.Errorf("deadletter: mark %s: %w", what, err)
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	if ddb.IsConditionFailed(err) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("deadletter: mark %s %s: %w", id, what, err)
	}
	return nil
}

// Filter selects dead letters; a zero field selects everything.
type Filter struct {
	// Status keeps letters in that status ("" for any).
	Status Status
	// Type keeps letters of that job type (exactly; "unknown" for bodies
	// that name no registered type).
	Type string
	// Since keeps letters last seen at or after it.
	Since time.Time
	// Reason keeps letters whose reason contains it, ignoring case.
	Reason string
}

// Match reports whether f selects rec.
func (f Filter) Match(rec Record) bool {
	switch {
	case f.Status != "" && rec.Status != f.Status:
		return false
	case f.Type != "" && rec.Type != f.Type:
		return false
	case !f.Since.IsZero() && rec.LastSeen.Before(f.Since):
		return false
	case f.Reason != "" && !strings.Contains(strings.ToLower(rec.Reason), strings.ToLower(f.Reason)):
		return false
	}
	return true
}

// Select lists the live dead letters f selects, oldest first.
func (s *Store) Select(ctx context.Context, f Filter) ([]Record, error) {
	status := f.Status
	if s.Markers != nil && (status == StatusRedriven || status == StatusSucceeded) {
		status = "" // a redriven letter may read succeeded once settled
	}
	recs, err := s.List(ctx, status)
	if err == nil && s.Markers != nil {
		recs, err = Settle(ctx, recs, s.Markers)
	}
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r Record) bool { return !f.Match(r) }), nil
}

// Table is the store's table name.
func (s *Store) Table() string { return s.table }
