package engine

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/runstwice/runstwice/engine"

// The attributes every span of a job carries, and the record span's
// outcome.
const (
	AttrJobID      = "runstwice.job.id"
	AttrJobType    = "runstwice.job.type"
	AttrJobOutcome = "runstwice.job.outcome"
)

// traced runs do for one record inside its CONSUMER span, named
// "<queue> process" as OpenTelemetry's messaging conventions name it. The
// span continues the trace of the send that queued the record (the
// record's AWSTraceHeader, XRay's rules; for a job that waited in a
// one-time schedule, the traceparent of its envelope) and links to that
// send's span. It starts with messaging.system aws_sqs, the operation and
// the queue (the attributes a sampler may read), and ends with the SQS
// message id, the job's id and type, and the record's outcome (all but the
// outcome when the work panicked); a record that is retried,
// dead-lettered or whose claim failed ends it with an Error status. A
// record with no trace header starts a trace of its own. Without a tracer
// it is do.
func (m *runner) traced(ctx context.Context, it *item, do func(context.Context) outcome) outcome {
	if m.tracer == nil {
		return do(ctx)
	}
	start := m.spans.of(m.o.QueueName(it.msg, it.set.name))
	opts := start.opts
	if sc, ok := ParseXRay(it.trace); ok {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(trace.Link{SpanContext: sc}))
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := m.tracer.Start(ctx, start.name, opts...)
	ended := false
	defer func() {
		if !ended { // do panicked: the span still names its record and job
			span.SetAttributes(m.recordAttrs(it)...)
		}
		span.End()
	}()
	// The record's item outlives its span: the context points at the job
	// it names rather than holding a copy of its own.
	it.job = tracedJob{it.key.JobID, it.set.name}
	ctx = context.WithValue(ctx, tracedJobKey{}, &it.job)
	// The record's log lines say their span (and its trace, when the
	// record came without one).
	sc := span.SpanContext()
	lines := &spanLines{Handler: it.log.Handler(), n: 1}
	if it.trace != "" || !sc.IsValid() {
		lines.attrs[0] = slog.String(keySpanID, sc.SpanID().String())
	} else {
		// A record that came without a trace sends under its span's (see
		// process), and its log lines name the trace the span started:
		// both from one header.
		var root, parent string
		it.sends, root, parent = formatXRay(sc)
		lines.attrs[0], lines.attrs[1], lines.n = slog.String(keySpanID, parent), slog.String(keyTraceID, root), 2
	}
	it.log = slog.New(lines)
	o := do(ctx)
	ended = true
	// The attributes a sampler may want are the span's from its start (the
	// messaging conventions' "sampling relevant" ones); the record's own
	// are set with its outcome, in one write.
	span.SetAttributes(append(m.recordAttrs(it), attribute.String(AttrJobOutcome, outcomes[o.kind].name))...)
	switch o.kind {
	case kindFailed, kindPending, kindDeadLettered, kindClaimFailed, kindInterrupted:
		span.SetStatus(codes.Error, o.reason)
		if o.err != nil {
			span.RecordError(o.err)
		}
	}
	return o
}

// recordAttrs are the attributes of a record's span that name the record
// and its job, with room for its outcome.
func (m *runner) recordAttrs(it *item) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 3, 4)
	attrs[0] = attribute.String("messaging.message.id", it.msg.MessageId)
	attrs[1] = attribute.String(AttrJobID, it.key.JobID)
	attrs[2] = attribute.String(AttrJobType, it.set.name)
	return attrs
}

// spanStart is how a record span of one queue starts: its name and its
// options (its kind, and the attributes of its queue).
type spanStart struct {
	name string
	opts []trace.SpanStartOption
}

// maxSpanStarts is how many queues' span starts a runner keeps (a
// function reads from a few; more are made afresh each time).
const maxSpanStarts = 64

// spanStarts keeps each queue's spanStart, made once.
type spanStarts struct {
	mu sync.RWMutex
	m  map[string]spanStart
}

// of returns the span start of queue.
func (c *spanStarts) of(queue string) spanStart {
	c.mu.RLock()
	s, ok := c.m[queue]
	c.mu.RUnlock()
	if ok {
		return s
	}
	s = spanStart{name: queue + " process", opts: []trace.SpanStartOption{
		consumerKind,
		trace.WithAttributes(
			attribute.String("messaging.system", "aws_sqs"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", queue)),
	}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]spanStart{}
	}
	if len(c.m) < maxSpanStarts {
		c.m[queue] = s
	}
	return s
}

// spanLines adds a record span's attributes (its span id, and the trace
// it started) to each line of the record's logger as the line is written:
// cheaper than WithAttrs, which formats every attribute the logger already
// has again, for the line or two a record writes.
type spanLines struct {
	slog.Handler
	attrs [2]slog.Attr // the first n are set
	n     int
}

func (h *spanLines) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(h.attrs[:h.n]...)
	return h.Handler.Handle(ctx, r)
}

func (h *spanLines) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &spanLines{h.Handler.WithAttrs(attrs), h.attrs, h.n}
}

func (h *spanLines) WithGroup(name string) slog.Handler {
	return h.Handler.WithAttrs(slices.Clone(h.attrs[:h.n])).WithGroup(name) // the span's attributes stay outside the group
}

// consumerKind is the kind of every record span.
var consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)

// tracedJobKey carries the job a span is about in a context.
type tracedJobKey struct{}

type tracedJob struct{ id, typ string }

// ContextWithTracedJob returns ctx naming the job its spans are about, so
// that the spans started under it (an AWS call's CLIENT span) carry
// runstwice.job.id and runstwice.job.type too. The runner sets it inside a
// record's span; an enqueue sets it inside its request's.
func ContextWithTracedJob(ctx context.Context, jobID, jobType string) context.Context {
	return context.WithValue(ctx, tracedJobKey{}, tracedJob{jobID, jobType})
}

// TracedJobAttributes are the job attributes of ctx's job
// (ContextWithTracedJob), none without one.
func TracedJobAttributes(ctx context.Context) []attribute.KeyValue {
	var j tracedJob
	switch v := ctx.Value(tracedJobKey{}).(type) {
	case tracedJob:
		j = v
	case *tracedJob: // the runner's, in the record's item
		j = *v
	default:
		return nil
	}
	return []attribute.KeyValue{attribute.String(AttrJobID, j.id), attribute.String(AttrJobType, j.typ)}
}

// spanTraceID is the trace of ctx's span in X-Ray form, "" without one: the
// traceId of a job whose record span started its trace (a recurring
// schedule's tick).
func spanTraceID(ctx context.Context) string {
	return XRayTraceID(trace.SpanContextFromContext(ctx).TraceID())
}
