package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/idempotency"
)

// A batch is up to MaxBatch jobs accepted all or nothing (POST
// /v1/batches). Its item, batch#<batchId> in the jobs table, is written
// once every job of the request is valid and before any job is reserved:
// it holds each job as its own request would have made it, under an id
// derived from the batch's Idempotency-Key and the job's index, so the
// accept can be finished by whoever comes next (a retry of the request,
// or the batch's finisher message) and never makes a second job. Until the item
// exists no job does; once it does, the batch completes.

// MaxBatch is how many jobs one batch may hold.
const MaxBatch = 100

// Batch states.
const (
	// BatchAccepting: the batch's item is written; its jobs are being
	// reserved and sent.
	BatchAccepting = "Accepting"
	// BatchAccepted: every job of the batch exists and was handed over;
	// the item holds the answer.
	BatchAccepted = "Accepted"
)

// BatchPK is the key of batch batchID's item.
func BatchPK(batchID string) string { return "batch#" + batchID }

// BatchJob is one job of a batch as the batch's item keeps it: the job its
// own request would have reserved, and, once accepted, what the batch
// answers about it.
type BatchJob struct {
	Index int `dynamodbav:"index"`
	// Job is the job to reserve: its After is a job id, or "#<index>" of
	// an earlier job of the batch (resolved to that job's answered id).
	Job    Job                      `dynamodbav:"-"`
	Stored batchJobStored           `dynamodbav:"job"`
	Policy contract.DuplicatePolicy `dynamodbav:"policy"`
	// JobID, State and Deduplicated are the answer: the job the index
	// became (its own, or the active job it deduplicated onto).
	JobID        string `dynamodbav:"jobId,omitempty"`
	State        State  `dynamodbav:"state,omitempty"`
	Deduplicated bool   `dynamodbav:"deduplicated,omitempty"`
}

// batchJobStored is a BatchJob's job as its item stores it.
type batchJobStored struct {
	ID            string `dynamodbav:"id"`
	Type          string `dynamodbav:"type"`
	Key           string `dynamodbav:"key"`
	Queue         string `dynamodbav:"queue"`
	CorrelationID string `dynamodbav:"correlationId"`
	TraceID       string `dynamodbav:"traceId,omitempty"`
	Message       string `dynamodbav:"message"`
	Fingerprint   string `dynamodbav:"fingerprint"`
	CreatedAt     int64  `dynamodbav:"createdAt"`
	RunAt         int64  `dynamodbav:"runAt"`
	After         string `dynamodbav:"after,omitempty"`
	AfterPolicy   string `dynamodbav:"afterPolicy,omitempty"`
}

// Batch is a batch's item.
type Batch struct {
	PK          string     `dynamodbav:"pk"`
	ID          string     `dynamodbav:"batchId"`
	Caller      string     `dynamodbav:"batchCaller"`
	Fingerprint string     `dynamodbav:"fingerprint"`
	State       string     `dynamodbav:"state"`
	CreatedAt   int64      `dynamodbav:"createdAt"`
	Jobs        []BatchJob `dynamodbav:"jobs"`
	ExpiresAt   int64      `dynamodbav:"expiresAt"`
	// TakenBy is the try of the batch's accept (its request, a retry, the
	// finisher) that holds it until TakenUntil (Unix ms): one try at a time
	// decides its jobs (TakeBatch), and only the holder marks it accepted.
	TakenBy    string `dynamodbav:"takenBy,omitempty"`
	TakenUntil int64  `dynamodbav:"takenUntil,omitempty"`
}

// BatchLease is how long a try of a batch's accept holds the batch: longer
// than any try runs (the enqueue and chain functions stop at 30 s), so two
// tries never decide its jobs at once.
const BatchLease = 45 * time.Second

// ErrBatchBusy is returned (wrapped) by TakeBatch when another try holds
// the batch, or it is no longer Accepting.
var ErrBatchBusy = errors.New("jobs: another try holds the batch")

// TakeBatch makes try owner the holder of batch b for BatchLease, if b is
// still Accepting and no other try holds it (its lease is absent, expired
// or owner's own); else ErrBatchBusy. It returns b held by owner, or, when
// busy, b with the holder and its TakenUntil as stored.
func (s *Store) TakeBatch(ctx context.Context, b Batch, owner string) (Batch, error) {
	now := s.now()
	until := now.Add(BatchLease).UnixMilli()
	free := expression.AttributeNotExists(expression.Name("takenUntil")).
		Or(expression.Name("takenUntil").LessThanEqual(expression.Value(now.UnixMilli()))).
		Or(expression.Name("takenBy").Equal(expression.Value(owner)))
	u, err := ddb.Update(s.table, keyAV(BatchPK(b.ID)),
		expression.Set(expression.Name("takenBy"), expression.Value(owner)).Set(expression.Name("takenUntil"), expression.Value(until)),
		expression.Name(AttrState).Equal(expression.Value(BatchAccepting)).And(free), true)
	if err != nil {
		return b, fmt.Errorf("jobs: take batch %s: %w", b.ID, err)
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	switch {
	case ddb.IsConditionFailed(err):
		var held struct {
			TakenBy    string `dynamodbav:"takenBy"`
			TakenUntil int64  `dynamodbav:"takenUntil"`
		}
		_ = attributevalue.UnmarshalMap(ddb.OldItem(err), &held)
		b.TakenBy, b.TakenUntil = held.TakenBy, held.TakenUntil
		return b, fmt.Errorf("%w: %s", ErrBatchBusy, b.ID)
	case err != nil:
		return b, fmt.Errorf("jobs: take batch %s: %w", b.ID, err)
	}
	b.TakenBy, b.TakenUntil = owner, until
	return b, nil
}

// Created is when the batch was accepted first.
func (b Batch) Created() time.Time { return fromMS(b.CreatedAt) }

func (b *Batch) store() {
	for i := range b.Jobs {
		j := b.Jobs[i].Job
		b.Jobs[i].Stored = batchJobStored{
			ID: j.ID, Type: j.Type, Key: j.Key, Queue: j.Queue, CorrelationID: j.CorrelationID, TraceID: j.TraceID,
			Message: j.Message, Fingerprint: j.Fingerprint, CreatedAt: ms(j.CreatedAt), RunAt: ms(j.RunAt),
			After: j.After, AfterPolicy: string(j.AfterPolicy),
		}
	}
}

func (b *Batch) load() {
	for i := range b.Jobs {
		s := b.Jobs[i].Stored
		b.Jobs[i].Job = Job{
			ID: s.ID, Caller: b.Caller, Type: s.Type, Key: s.Key, Queue: s.Queue, CorrelationID: s.CorrelationID, TraceID: s.TraceID,
			Message: s.Message, Fingerprint: s.Fingerprint, CreatedAt: fromMS(s.CreatedAt), RunAt: fromMS(s.RunAt),
			After: s.After, AfterPolicy: contract.AfterPolicy(s.AfterPolicy),
		}
	}
}

// ErrBatchMismatch is returned (wrapped) when a batch's id already holds
// another request's batch (its Idempotency-Key reused after its stored
// answer expired).
var ErrBatchMismatch = errors.New("jobs: the batch id holds another request's batch")

// PutBatch writes batch b's item (Accepting), or finds the one an earlier
// try of the same request wrote, and returns the batch as stored. Its life
// is until, at least: the batch is kept as long as its answer.
func (s *Store) PutBatch(ctx context.Context, b Batch, until time.Time) (Batch, error) {
	b.PK, b.State, b.ExpiresAt = BatchPK(b.ID), BatchAccepting, until.Unix()
	b.store()
	now := s.now()
	put, err := ddb.Put(s.table, b, ddb.AbsentOrExpired(AttrPK, now), true)
	if err != nil {
		return Batch{}, fmt.Errorf("jobs: put batch %s: %w", b.ID, err)
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: put}}})
	if err == nil {
		b.load()
		return b, nil
	}
	if !ddb.IsConditionFailed(err) {
		return Batch{}, fmt.Errorf("jobs: put batch %s: %w", b.ID, err)
	}
	got, err := s.GetBatch(ctx, b.ID)
	switch {
	case err != nil:
		return Batch{}, err
	case got.Caller != b.Caller || got.Fingerprint != b.Fingerprint:
		return Batch{}, fmt.Errorf("%w: %s", ErrBatchMismatch, b.ID)
	}
	return got, nil
}

// GetBatch reads batch batchID (consistent); a missing or expired one is
// ErrNotFound. It does not check the caller.
func (s *Store) GetBatch(ctx context.Context, batchID string) (Batch, error) {
	var b Batch
	ok, err := s.getItem(ctx, BatchPK(batchID), &b)
	switch {
	case err != nil:
		return Batch{}, err
	case !ok:
		return Batch{}, fmt.Errorf("%w: batch %s", ErrNotFound, batchID)
	}
	b.load()
	return b, nil
}

// ReleaseBatch ends the hold of the try that holds b (b.TakenBy), when it
// stops without accepting it, so that a retry need not wait out its lease.
// A batch another try has taken since is left as it is.
func (s *Store) ReleaseBatch(ctx context.Context, b Batch) error {
	err := s.updateItem(ctx, BatchPK(b.ID), expression.Remove(expression.Name("takenUntil")),
		expression.Name("takenBy").Equal(expression.Value(b.TakenBy)))
	if err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: release batch %s: %w", b.ID, err)
	}
	return nil
}

// BatchAccepted is the write that records batch b accepted with its
// answers (b.Jobs' JobID, State, Deduplicated), to commit with the
// request's completion (an idempotency.Companion) or on its own
// (Store.AcceptBatch). Only the try that holds the batch (b.TakenBy) writes
// it; writing it again is harmless.
func (s *Store) BatchAccepted(b Batch) idempotency.Companion { return batchAccepted{s: s, b: b} }

type batchAccepted struct {
	s *Store
	b Batch
}

// TransactItem is the acceptance as a transaction element.
func (a batchAccepted) TransactItem() (types.TransactWriteItem, error) {
	b := a.b
	b.store()
	held := expression.Name("takenBy").Equal(expression.Value(b.TakenBy))
	if b.TakenBy == "" {
		held = expression.AttributeNotExists(expression.Name("takenBy")) // a batch written before holds existed
	}
	u, err := ddb.Update(a.s.table, keyAV(BatchPK(b.ID)),
		expression.Set(expression.Name(AttrState), expression.Value(BatchAccepted)).Set(expression.Name("jobs"), expression.Value(b.Jobs)),
		expression.AttributeExists(expression.Name(AttrPK)).And(held), false)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("jobs: accept batch %s: %w", b.ID, err)
	}
	return types.TransactWriteItem{Update: u}, nil
}

// AcceptBatch records batch b accepted (BatchAccepted) on its own.
func (s *Store) AcceptBatch(ctx context.Context, b Batch) error {
	it, err := s.BatchAccepted(b).TransactItem()
	if err != nil {
		return err
	}
	if _, err := s.client.UpdateItem(ctx, ddb.UpdateInput(it.Update)); err != nil {
		return fmt.Errorf("jobs: accept batch %s: %w", b.ID, err)
	}
	return nil
}
