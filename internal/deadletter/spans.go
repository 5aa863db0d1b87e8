package deadletter

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/obs"
)

// tracerName is the instrumentation scope of the dlq function's spans.
const tracerName = "github.com/runstwice/runstwice/internal/deadletter"

// SpanName is the name of the consumer's span of one dead letter, as
// OpenTelemetry's messaging conventions name a consumer's span
// ("<queue> process").
const SpanName = "dlq process"

// span starts the CONSUMER span of one letter (SpanName), when the
// consumer traces: it continues the trace the letter carries (its
// AWSTraceHeader, else its envelope's traceparent: runner.JobTraceHeader)
// and links to that span, with the messaging attributes, the job's id and
// type (when the body names a job) and, once recorded, the letter's status
// and class; the spans started under it carry the job too, and the
// letter's log lines its span id. end takes what became of the letter: an Error
// status when it is retried (err). Without a tracer it does nothing.
func (c *Consumer) span(ctx context.Context, l *letter) (context.Context, func(err error)) {
	if c.cfg.TracerProvider == nil {
		return ctx, func(error) {}
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "aws_sqs"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", queueName(l.msg.EventSourceARN)),
		attribute.String("messaging.message.id", l.msg.MessageId),
	}
	if l.decoded {
		attrs = append(attrs, attribute.String(engine.AttrJobID, l.rec.JobID), attribute.String(engine.AttrJobType, l.key.Type))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc, ok := engine.ParseXRay(l.trace); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := c.cfg.TracerProvider.Tracer(tracerName).Start(ctx, SpanName, opts...)
	if l.decoded {
		ctx = engine.ContextWithTracedJob(ctx, l.rec.JobID, l.key.Type)
	}
	l.log = l.log.With(obs.KeySpanID, span.SpanContext().SpanID().String())
	return ctx, func(err error) {
		span.SetAttributes(attribute.String("runstwice.deadletter.status", string(l.rec.Status)),
			attribute.String("runstwice.deadletter.class", l.class))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "retried: "+err.Error())
		}
		span.End()
	}
}

// queueName is the queue name of an SQS ARN (its last field), "dlq" for
// none.
func queueName(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 && i < len(arn)-1 {
		return arn[i+1:]
	}
	return "dlq"
}
