// Package outbox is the transactional outbox of runstwice: a producer whose
// own state lives in DynamoDB adds one Put on the outbox table to its own
// TransactWriteItems, so the job exists if and only if its change commits.
// The table's stream (NEW_IMAGE) feeds the relay (functions/outbox), which
// enqueues each item exactly as the HTTP API would, for caller
// outbox:<producer> with the item's Idempotency-Key: the same job id, dedup,
// duplicate policy and scheduling. See docs/storage.md for the item format.
//
// The rules:
//   - An item is relayed at least once (a stream record can be delivered
//     twice, a producer can write an item twice); the job id derived from
//     (caller, idempotency key) makes every relay of it one job.
//   - An item that breaks a rule never blocks its shard: it is recorded as a
//     dead letter with its reason (source "outbox") and counted, and the
//     relay goes on (letter.go). The letter always fits in its table, and is
//     filed under the job of the producer the item's pk proves.
//   - A transient failure (the jobs table or the queue unreachable) is a
//     batch item failure: the shard is retried from that record on.
//   - REMOVE records (the item's TTL expiry, or its producer deleting it)
//     are ignored.
//   - With a tracer provider, each record is relayed inside a CONSUMER
//     span that continues the item's traceparent (spans.go): the job's
//     spans and its traceId are the producer's trace.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/vclock"
)

// Enqueuer enqueues one request exactly as the HTTP API does: the same job
// id derivation, validation, dedup, duplicate policy and scheduling
// (*enqueue.Handler is one).
type Enqueuer interface {
	EnqueueFor(ctx context.Context, r enqueue.Request) enqueue.Answer
}

// DeadLetters records an item that breaks a rule (*deadletter.Store is
// one).
type DeadLetters interface {
	SaveDelivery(ctx context.Context, rec deadletter.Record, deliveryID string) (deadletter.Saved, error)
}

// SourceOutbox is the source a dead letter of the relay names.
const SourceOutbox = "outbox"

// Relay handles batches of the outbox table's stream. Enqueuer and
// DeadLetters are required.
type Relay struct {
	Enqueuer    Enqueuer
	DeadLetters DeadLetters
	Logger      *slog.Logger
	Metrics     *engine.Metrics
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// TracerProvider, when set, makes a CONSUMER span per stream record
	// (SpanName), continuing the item's traceparent: the job's spans and
	// its traceId are that trace. nil makes none.
	TracerProvider trace.TracerProvider
}

// ParentWait is how long after an item was written the relay waits for the
// job its after names to exist: the parent's own item, written in the same
// transaction, may be relayed a moment later (the stream orders records of
// one item, not of two). Until then a 404 for the parent is retried; after
// it the item is a dead letter.
const ParentWait = 2 * time.Minute

// young reports whether rec was written less than ParentWait ago.
func (r *Relay) young(rec events.DynamoDBEventRecord) bool {
	return r.now().Sub(rec.Change.ApproximateCreationDateTime.Time) < ParentWait
}

func (r *Relay) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return vclock.Now()
}

// Handle relays a batch of stream records in order. It never returns an
// error: a transient failure is reported as the batch item failure of its
// record (the event source mapping retries the shard from there on), and a
// record that breaks a rule is dead-lettered and done.
func (r *Relay) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	defer r.Metrics.Flush()
	log := obs.WithRequest(ctx, r.logger())
	var resp events.DynamoDBEventResponse
	for _, rec := range ev.Records {
		if err := r.relay(ctx, log, rec); err != nil {
			log.Warn("stream record not relayed; the shard is retried from it", "eventId", rec.EventID,
				"sequenceNumber", rec.Change.SequenceNumber, obs.KeyError, obs.Redact(err))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
			break // the records after it are retried with it, in order
		}
	}
	return resp, nil
}

func (r *Relay) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// errTransient marks an answer the relay retries.
var errTransient = errors.New("outbox: transient")

// relay handles one record, inside its span when the relay traces; an
// error is transient (retry).
func (r *Relay) relay(ctx context.Context, log *slog.Logger, rec events.DynamoDBEventRecord) error {
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
		return nil // REMOVE: the item expired or was deleted; nothing to relay
	}
	image := Values(rec.Change.NewImage)
	it, decodeErr := contract.DecodeOutboxItem(image)
	if decodeErr != nil {
		// Its producer and idempotencyKey attributes are the item's claims:
		// it is filed, traced and logged under what its pk proves.
		it.Producer, it.IdempotencyKey = owner(image)
	}
	ctx, end := r.span(ctx, rec, it)
	dead, err := r.relayItem(ctx, log, rec, it, decodeErr)
	end(err, dead)
	return err
}

// relayItem enqueues the record's item, or records it as a dead letter
// (dead) when it breaks a rule (decodeErr, or the API's answer); an error
// is transient (retry).
func (r *Relay) relayItem(ctx context.Context, log *slog.Logger, rec events.DynamoDBEventRecord, it contract.OutboxItem, decodeErr error) (dead bool, err error) {
	if decodeErr != nil {
		if it.Producer != "" {
			log = log.With(obs.KeyJobID, it.JobID(), "producer", it.Producer, "eventId", rec.EventID)
		}
		return true, r.deadLetter(ctx, log, rec, it, decodeErr.Error())
	}
	log = log.With(obs.KeyJobID, it.JobID(), obs.KeyMessageID, it.JobID(), obs.KeyType, it.Type, "producer", it.Producer, "eventId", rec.EventID)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		log = log.With(obs.KeySpanID, sc.SpanID().String())
	}
	if it.ExpiresAt > 0 && !r.now().Before(time.Unix(it.ExpiresAt, 0)) {
		// Expired, not yet deleted by the TTL (which can take days): as
		// every read here, an expired item is gone. Relayed, a late write of
		// it could outlive the decision stored for it and make a second job.
		return true, r.deadLetter(ctx, log, rec, it, fmt.Sprintf(
			"the item expired at %s, before it was relayed (an expired item is gone; write a new one)", time.Unix(it.ExpiresAt, 0).UTC().Format(time.RFC3339)))
	}
	a := r.Enqueuer.EnqueueFor(ctx, enqueue.Request{Caller: it.Caller(), Type: it.Type, IdempotencyKey: it.IdempotencyKey,
		CorrelationID: it.CorrelationID, Body: it.Body(), RelayableUntil: it.RelayableUntil()})
	switch {
	case a.Status >= 200 && a.Status < 300:
		if a.JobID != "" && a.JobID != it.JobID() {
			// An active job of the caller held the item's natural key: the
			// item dedups onto it, as a request would (200).
			log.Info("outbox item relayed onto the active job with its key", "status", a.Status, "state", a.State, "dedupedOnto", a.JobID)
			return false, nil
		}
		log.Info("outbox item relayed", "status", a.Status, "state", a.State)
		return false, nil
	case a.Status == http.StatusConflict && a.Problem == enqueue.ProblemDuplicate:
		log.Info("outbox item's job refused by its duplicate policy; nothing enqueued", "status", a.Status, obs.KeyReason, a.Detail)
		return false, nil
	case a.Status == http.StatusNotFound && a.Problem == enqueue.ProblemNotFound && it.After != "" && r.young(rec):
		return false, fmt.Errorf("%w: the job it waits for is not there yet: %s", errTransient, a.Detail)
	case a.Problem == enqueue.ProblemScheduleQuota, a.Problem == enqueue.ProblemTooManyContinuations:
		// No retry of the stream can succeed until an operator raises the
		// quota (alarmed), or a continuation of the parent is cancelled:
		// the item is a dead letter with the reason, and the shard goes on.
		return true, r.deadLetter(ctx, log, rec, it, fmt.Sprintf("%d %s: %s", a.Status, a.Problem, a.Detail))
	case a.Status >= 500 || a.Status == http.StatusConflict || a.Status == http.StatusTooManyRequests:
		return false, fmt.Errorf("%w: %d %s: %s", errTransient, a.Status, a.Problem, a.Detail)
	}
	return true, r.deadLetter(ctx, log, rec, it, fmt.Sprintf("%d %s: %s", a.Status, a.Problem, a.Detail))
}

// Values converts a stream record's image to the relay's values.
func Values(image map[string]events.DynamoDBAttributeValue) map[string]contract.OutboxValue {
	out := make(map[string]contract.OutboxValue, len(image))
	for k, v := range image {
		out[k] = value(v)
	}
	return out
}

func value(v events.DynamoDBAttributeValue) contract.OutboxValue {
	switch v.DataType() {
	case events.DataTypeString:
		s := v.String()
		return contract.OutboxValue{S: &s}
	case events.DataTypeNumber:
		n := v.Number()
		return contract.OutboxValue{N: &n}
	case events.DataTypeMap:
		return contract.OutboxValue{M: Values(v.Map())}
	}
	return contract.OutboxValue{Bad: dataTypeName(v.DataType())}
}

func dataTypeName(t events.DynamoDBDataType) string {
	names := map[events.DynamoDBDataType]string{events.DataTypeBinary: "B", events.DataTypeBoolean: "BOOL",
		events.DataTypeBinarySet: "BS", events.DataTypeList: "L", events.DataTypeNull: "NULL",
		events.DataTypeNumberSet: "NS", events.DataTypeStringSet: "SS"}
	if n, ok := names[t]; ok {
		return n
	}
	return "unknown"
}

// Plain is an image as plain JSON values (strings, numbers as text, maps),
// for a dead letter's body.
func Plain(vals map[string]contract.OutboxValue) map[string]any {
	out := make(map[string]any, len(vals))
	for k, v := range vals {
		switch {
		case v.S != nil:
			out[k] = *v.S
		case v.N != nil:
			out[k] = json.Number(*v.N)
		case v.M != nil:
			out[k] = Plain(v.M)
		default:
			out[k] = "(" + strings.ToLower(v.Bad) + ")"
		}
	}
	return out
}
