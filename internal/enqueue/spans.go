package enqueue

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/tracing"
	"github.com/runstwice/runstwice/message"
)

// tracerName is the instrumentation scope of the API's spans.
const tracerName = "github.com/runstwice/runstwice/internal/enqueue"

// serverSpan starts the request's SERVER span, "<method> <route>"
// (OpenTelemetry's HTTP conventions), continuing the request's X-Ray trace
// when it has one (the Lambda invocation's segment, or the header API
// Gateway passed on; a header with a Root and no Parent makes the span the
// root of that trace, with a provider whose ids are tracing.IDs) and
// starting a trace otherwise. route is the request's route (Routes; ""
// for none). end records the status (an Error status for a 5xx). Without
// a tracer it does nothing.
func (h *Handler) serverSpan(ctx context.Context, r *http.Request, route string) (context.Context, func(status int)) {
	if h.TracerProvider == nil {
		return ctx, func(int) {}
	}
	header := traceHeader(ctx, r.Header)
	if sc, ok := engine.ParseXRay(header); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else if id, ok := engine.XRayRoot(header); ok {
		// A Root with no Parent: the caller started the trace and made no
		// span, so the request's span is the trace's root.
		ctx = tracing.WithTraceID(ctx, id)
	}
	method, route := r.Method, httpRoute(route)
	name := method
	if route != "" {
		name += " " + route
	}
	ctx, span := h.TracerProvider.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route)))
	return ctx, func(status int) {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
		span.End()
	}
}

// jobTraceID is the traceId a new job records: the request span's trace
// in X-Ray form when the API traces, else the request's X-Ray root ("" for
// none). The two are one trace when the request came with one.
func jobTraceID(ctx context.Context, header string) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return engine.XRayTraceID(sc.TraceID())
	}
	return obs.TraceRoot(header)
}

// producerSpan starts the PRODUCER span of a job's send to its queue,
// "send <queue>", and returns the AWSTraceHeader the message carries: the
// producer span's context (the worker's record span continues it and
// links to it), or the job's trace root when the API does not trace.
func (h *Handler) producerSpan(ctx context.Context, job jobs.Job) (context.Context, string, trace.Span) {
	if h.TracerProvider == nil {
		return ctx, sqsTraceHeader(job.TraceID), nil
	}
	ctx, span := h.messageSpan(ctx, "send", job)
	return ctx, engine.FormatXRay(span.SpanContext()), span
}

// scheduleSpan starts the PRODUCER span of a job handed to EventBridge
// Scheduler, "create <queue>" (its message is made now, and the scheduler
// sends it when it is due), and puts the span's context in the job's
// message as its traceparent: the scheduler sends the message with no
// trace header, so the worker's record span continues the job's trace
// from its envelope, and links to this span. Without a tracer, or for a
// message that does not decode, the message is left as it is.
func (h *Handler) scheduleSpan(ctx context.Context, job *jobs.Job) (context.Context, trace.Span) {
	if h.TracerProvider == nil {
		return ctx, nil
	}
	ctx, span := h.messageSpan(ctx, "create", *job)
	if env, err := message.Decode([]byte(job.Message)); err == nil {
		env.Traceparent = engine.FormatTraceparent(span.SpanContext())
		if b, err := env.Encode(); err == nil {
			job.Message = string(b)
		}
	}
	return ctx, span
}

// messageSpan starts the PRODUCER span "<op> <queue>" of job's message,
// with OpenTelemetry's messaging attributes and the job's.
func (h *Handler) messageSpan(ctx context.Context, op string, job jobs.Job) (context.Context, trace.Span) {
	return h.TracerProvider.Tracer(tracerName).Start(ctx, op+" "+job.Queue, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "aws_sqs"),
			attribute.String("messaging.operation.type", op),
			attribute.String("messaging.destination.name", job.Queue),
			attribute.String("messaging.message.id", job.ID),
			attribute.String(engine.AttrJobID, job.ID),
			attribute.String(engine.AttrJobType, job.Type),
		))
}

// endSpan ends a PRODUCER span (nil: none), with an Error status when its
// hand-over failed.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// nameJob puts the job's id and type on the request's span and on the
// spans started under it (when it has a recording one): every span of a
// job carries them.
func nameJob(ctx context.Context, id, jobType string) context.Context {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return ctx
	}
	span.SetAttributes(attribute.String(engine.AttrJobID, id), attribute.String(engine.AttrJobType, jobType))
	return engine.ContextWithTracedJob(ctx, id, jobType)
}
