package tracing

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// clientTracer is the instrumentation scope of the AWS calls' spans.
const clientTracer = "github.com/runstwice/runstwice/internal/tracing"

// ClientSpans is an AWS SDK API option (aws.Config.APIOptions) that makes
// a CLIENT span per operation, "<Service>.<Operation>" (DynamoDB.PutItem,
// SQS.SendMessage, SESv2.SendEmail, Scheduler.CreateSchedule), with the
// rpc.* and cloud.region attributes, the attributes more(ctx) gives (the
// job's: engine.TracedJobAttributes), and an Error status when the call
// failed. It wraps the whole operation, the SDK's retries included.
//
// A call made outside every span (ctx carries no valid span context) gets
// none: its span would be the root of a trace of its own, about no job
// and no request. Those are the calls a function makes for a whole batch,
// before or after its records' spans: the runner's batch peek of the
// markers (BatchGetItem), its back-off of the batch's retries
// (ChangeMessageVisibilityBatch) and the kill-switch reads, and the dlq
// function's batch peek. Their time shows as the gap before the first
// record's span and after the last.
func ClientSpans(tp trace.TracerProvider, more func(context.Context) []attribute.KeyValue) func(*middleware.Stack) error {
	tracer := tp.Tracer(clientTracer)
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("runstwiceClientSpan",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if !trace.SpanContextFromContext(ctx).IsValid() {
					return next.HandleInitialize(ctx, in) // no orphan root trace
				}
				service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				attrs := append([]attribute.KeyValue{
					attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", service),
					attribute.String("rpc.method", op), attribute.String("cloud.region", awsmiddleware.GetRegion(ctx)),
				}, more(ctx)...)
				ctx, span := tracer.Start(ctx, service+"."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
				defer span.End()
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
				}
				return out, md, err
			}), middleware.After)
	}
}
