package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

// OutboxJob is a job to enqueue inside a producer's own DynamoDB
// transaction: the outbox item OutboxPut writes.
type OutboxJob struct {
	// Producer names the producer (1-64 of a-z, 0-9 and '-'); its jobs
	// belong to caller outbox:<Producer>, and an IAM condition on
	// dynamodb:LeadingKeys can limit its role to items "<Producer>#…".
	Producer string
	// IdempotencyKey names the change the job belongs to, as the
	// Idempotency-Key header does (1-255 printable ASCII). It is required:
	// a producer that writes its transaction again after an ambiguous
	// failure must write the same key, so both writes are one job.
	IdempotencyKey string
	// Type is the job type and Args its arguments (a struct or map that
	// encodes as a JSON object of strings), as for Enqueue.
	Type string
	Args any
	// Key, DuplicatePolicy, DelaySeconds, RunAt and CorrelationID are as in
	// EnqueueOptions (IdempotencyKey there is ignored).
	Options EnqueueOptions
}

// OutboxPut returns the Put of job's outbox item on the outbox table, for the
// producer to add to its own TransactWriteItems, and the id the job will
// have (unless, when the item is relayed, an active job of the same caller,
// type and natural key exists: then the item dedups onto that job, as a
// request would, and the relay logs its id). If the transaction fails there
// is no job; if it commits, the relay
// enqueues the job as the API would for caller outbox:<Producer> with
// IdempotencyKey. The request is checked with the API's own rules (the job
// type, its args, key, delay or runAt, policy) at now, so an item the relay
// would dead-letter is refused here. The Put has no condition: writing the
// same item again (a retried transaction) is the same job.
func OutboxPut(table string, job OutboxJob, now time.Time) (types.TransactWriteItem, string, error) {
	return OutboxPutContext(context.Background(), table, job, now)
}

// OutboxPutContext is OutboxPut for a producer that traces: when ctx
// carries a valid OpenTelemetry span context (the producer's span around
// its transaction), the item carries it as its traceparent, and the
// relay's span, the job's spans and the job's traceId continue that trace.
func OutboxPutContext(ctx context.Context, table string, job OutboxJob, now time.Time) (types.TransactWriteItem, string, error) {
	if table == "" {
		return types.TransactWriteItem{}, "", errors.New("client: OutboxPut needs the outbox table's name")
	}
	it, err := outboxItem(job, now)
	if err != nil {
		return types.TransactWriteItem{}, "", err
	}
	it.Traceparent = engine.FormatTraceparent(trace.SpanContextFromContext(ctx))
	item := contract.OutboxAttributes(it,
		func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} },
		func(n int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(n)} },
		func(m map[string]types.AttributeValue) types.AttributeValue {
			return &types.AttributeValueMemberM{Value: m}
		})
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item}}, it.JobID(), nil
}

// registry is the shipped job types, built once: OutboxPut runs on a
// producer's hot path, and a registry checks every declaration as it is
// built.
var registry = sync.OnceValue(contract.Registry)

// outboxItem builds and checks the item of job.
func outboxItem(job OutboxJob, now time.Time) (contract.OutboxItem, error) {
	jt, err := registry().Lookup(job.Type)
	if err != nil {
		return contract.OutboxItem{}, fmt.Errorf("client: %w", err)
	}
	raw, err := json.Marshal(job.Args)
	if err != nil {
		return contract.OutboxItem{}, fmt.Errorf("client: encode args of %s: %w", job.Type, err)
	}
	if err := contract.CheckMembers(raw, "args"); err != nil {
		return contract.OutboxItem{}, fmt.Errorf("client: %s: %w", job.Type, err)
	}
	var args map[string]string
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return contract.OutboxItem{}, fmt.Errorf("client: args of %s must encode as a JSON object of strings", job.Type)
	}
	o := job.Options
	it := contract.OutboxItem{
		Producer: job.Producer, IdempotencyKey: job.IdempotencyKey, Type: jt.Name, Args: args, Key: o.Key,
		Policy: string(o.DuplicatePolicy), CorrelationID: o.CorrelationID, ExpiresAt: now.Add(contract.OutboxRetention).Unix(),
	}
	if o.DelaySeconds != 0 {
		d := o.DelaySeconds
		it.DelaySeconds = &d
	}
	if !o.RunAt.IsZero() {
		it.RunAt = o.RunAt.UTC().Format(time.RFC3339Nano)
	}
	if err := it.Check(it.PK()); err != nil {
		return contract.OutboxItem{}, fmt.Errorf("client: %w", err)
	}
	if it.CorrelationID != "" && !message.ValidCorrelationID(it.CorrelationID) {
		return contract.OutboxItem{}, errors.New("client: CorrelationID must be 1-128 characters of letters, digits, '.', '_', ':' or '-'")
	}
	if _, err := contract.DecodeBodyAt(jt, it.Body(), now); err != nil {
		return contract.OutboxItem{}, fmt.Errorf("client: %s: %w", job.Type, err)
	}
	return it, nil
}
