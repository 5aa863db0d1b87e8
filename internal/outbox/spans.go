package outbox

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// tracerName is the instrumentation scope of the relay's spans.
const tracerName = "github.com/runstwice/runstwice/internal/outbox"

// SpanName is the name of the relay's span of one stream record, as
// OpenTelemetry's messaging conventions name a consumer's span
// ("<destination> process").
const SpanName = "outbox process"

// span starts the CONSUMER span of one stream record (SpanName), when the
// relay traces: it continues the trace of the item's traceparent (the
// producer's span around its transaction) and links to that span, and
// carries the stream event's id, the table and, when the item names them,
// the job's id and type, which the spans started under it carry too. A
// stream record whose item has no traceparent (or a malformed one) starts a trace
// of its own. end records the stream record's outcome: an Error status when it is
// retried (err) or dead-lettered. Without a tracer it does nothing.
func (r *Relay) span(ctx context.Context, rec events.DynamoDBEventRecord, it contract.OutboxItem) (context.Context, func(err error, dead bool)) {
	if r.TracerProvider == nil {
		return ctx, func(error, bool) {}
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", tableOf(rec.EventSourceArn)),
		attribute.String("messaging.message.id", rec.EventID),
	}
	named := it.Producer != "" && it.IdempotencyKey != ""
	if named {
		attrs = append(attrs, attribute.String(engine.AttrJobID, it.JobID()), attribute.String(engine.AttrJobType, it.Type))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc, ok := engine.ParseTraceparent(traceparentOf(rec)); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := r.TracerProvider.Tracer(tracerName).Start(ctx, SpanName, opts...)
	if named {
		ctx = engine.ContextWithTracedJob(ctx, it.JobID(), it.Type)
	}
	return ctx, func(err error, dead bool) {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, "retried: "+err.Error())
		case dead:
			span.SetStatus(codes.Error, "dead-lettered")
		}
		span.End()
	}
}

// traceparentOf is the traceparent of the record's item, read from its
// image so that an item that breaks a rule keeps its trace too.
func traceparentOf(rec events.DynamoDBEventRecord) string {
	v, ok := rec.Change.NewImage[contract.OutboxAttrTraceparent]
	if !ok || v.DataType() != events.DataTypeString {
		return ""
	}
	return v.String()
}

// tableOf is the table name in a stream's ARN
// (arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>), or
// "outbox" when the ARN names none.
func tableOf(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return "outbox"
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}
