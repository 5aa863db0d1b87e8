// Package runner runs the bundle's job types on the engine. The envelope
// (package message) is one Payload type among others: each registered type
// with a handler is a kind of the engine's Mux, named by the type, and each
// tick type a second route of its kind for its recurring schedule's ticks,
// whose job record the worker writes when it first sees one. Every record
// goes through the engine's one runner (docs/contract.md, "The runner"):
// the kill switch, the batched peek, the lease, the work, the claim.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// Job is what a Handler gets: the validated envelope and its type.
type Job struct {
	Envelope message.Envelope
	Type     message.JobType
	// Attempt is the SQS receive count of this delivery (1 for the first).
	Attempt int
	// Logger carries jobId, type, key, correlationId, traceId and the
	// request id.
	Logger *slog.Logger
}

// Handler runs one job type's work: load what the effect needs, then the
// effect. It may run concurrently with other records of the batch. Work that
// turns out unnecessary (user deleted, address already confirmed) returns
// engine.NoOp(reason): a success whose marker is still claimed. Return
// engine.Permanent(err) for a failure no retry can fix; any other error is
// retried.
type Handler interface {
	Handle(ctx context.Context, job Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job Job) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, job Job) error { return f(ctx, job) }

// TickJob is the job a recurring schedule's tick becomes (see
// message.Tick).
type TickJob struct {
	ID, Caller, Type, Key, Queue string
	CorrelationID, TraceID       string
	// Message is the envelope derived from the tick, encoded.
	Message string
	At      time.Time
}

// TickDecision is what RecordTick found.
type TickDecision struct {
	// Busy: another tick is creating the job of this key right now.
	Busy bool
	// Own: the record is this tick's own job; when false, HolderID names
	// the job of another scheduled time that holds the key.
	Own      bool
	HolderID string
	// Recorded: the record was written now (not found already there).
	Recorded bool
}

// TickJobs writes the job record of a tick the first time a worker sees
// it, as an enqueue does for a request.
type TickJobs interface {
	RecordTick(ctx context.Context, job TickJob) (TickDecision, error)
}

// Config wires a Runner. Registry, Switch, Markers and Parker are
// required; the rest are the engine's Options under the bundle's names.
type Config struct {
	Registry *message.Registry
	// Handlers maps a type name to its Handler. A registered type with no
	// handler in this function is a permanent failure.
	Handlers map[string]Handler
	Switch   engine.Switch
	Markers  engine.Store
	Parker   engine.Parker
	// DeadLetterer receives permanent failures.
	DeadLetterer engine.DeadLetterer
	// Jobs records parks, final failures and no-op reasons on job records.
	Jobs engine.JobRecorder
	// Ticks writes the job record of a recurring schedule's tick when a
	// worker first sees it (optional: without it a tick runs without a
	// record).
	Ticks           TickJobs
	Backoff         engine.Backoff
	BackoffSchedule engine.BackoffSchedule
	Random          func(n int64) int64
	ParkDelay       time.Duration
	MaxReceiveCount int
	Concurrency     int
	DeadlineMargin  time.Duration
	WriteTimeout    time.Duration
	ClaimAttempts   int
	Logger          *slog.Logger
	Metrics         *engine.Metrics
	TracerProvider  trace.TracerProvider
	Now             func() time.Time
	AtStep          func(engine.Step)
	Go              func(f func())
}

// Runner runs SQS batches of the bundle's jobs. It is safe for concurrent
// use.
type Runner struct {
	mux *engine.Mux[*Payload]
}

// Payload is one record of the bundle as the engine runs it: a job's
// envelope, or the envelope a recurring schedule's tick derives.
type Payload struct {
	Envelope message.Envelope
	// Type is the envelope's registered type.
	Type message.JobType
	// tick is the tick the record carried (nil for an envelope), and
	// encoded the envelope derived from it.
	tick    *message.Tick
	encoded string
	// invalid is why the envelope breaks its type's declaration (its key
	// function reports it, so the failure is counted under its type).
	invalid error
}

// tickRoute is the route of a tick type's ticks.
func tickRoute(name string) string { return "tick:" + name }

// New checks cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("runner: Registry is required")
	case cfg.Switch == nil:
		return nil, errors.New("runner: Switch is required")
	case cfg.Markers == nil:
		return nil, errors.New("runner: Markers is required")
	case cfg.Parker == nil:
		return nil, errors.New("runner: Parker is required")
	}
	reg := cfg.Registry
	o := engine.Options{
		Store: cfg.Markers, Switch: cfg.Switch, Parker: Attributed(cfg.Parker), DeadLetterer: cfg.DeadLetterer, Recorder: cfg.Jobs,
		Backoff: cfg.Backoff, BackoffSchedule: cfg.BackoffSchedule, Random: cfg.Random, ParkDelay: cfg.ParkDelay,
		MaxReceiveCount: cfg.MaxReceiveCount, Concurrency: cfg.Concurrency, DeadlineMargin: cfg.DeadlineMargin,
		WriteTimeout: cfg.WriteTimeout, ClaimAttempts: cfg.ClaimAttempts, Logger: cfg.Logger, Metrics: cfg.Metrics,
		TracerProvider: cfg.TracerProvider, Now: cfg.Now, AtStep: cfg.AtStep, Go: cfg.Go,
		QueueName: func(_ events.SQSMessage, kind string) string {
			t, _ := reg.Lookup(kind)
			return string(t.Queue)
		},
	}
	mux, err := engine.NewMux(o, func(b []byte) (*Payload, error) { return decode(reg, b) }, func(p *Payload) string {
		if p.tick != nil {
			return tickRoute(p.Envelope.Type)
		}
		return p.Envelope.Type
	})
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	for name, h := range cfg.Handlers {
		t, err := reg.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("runner: handler for %w", err)
		}
		if c, ok := h.(argsChecker); ok {
			if err := c.checkArgs(t); err != nil {
				return nil, fmt.Errorf("runner: handler for %s: %w", name, err)
			}
		}
		work := Work(h)
		k := KindOf(reg, t)
		if t.WhileOff == engine.Skip && t.TickArgs != nil {
			// Of a tick type only a tick skips: any other job of it (a page
			// a tick's job enqueued) carries work a tick started, and parks.
			k.WhileOff = engine.Park
		}
		if err := mux.Handle(name, k, work); err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
		if t.TickArgs == nil {
			continue
		}
		tk := KindOf(reg, t)
		tk.WhileOff = engine.Skip
		if cfg.Ticks != nil {
			tk.Admit = recordTick(cfg.Ticks)
		}
		if err := mux.Handle(tickRoute(name), tk, work); err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
	}
	return &Runner{mux: mux}, nil
}

// Handle runs a batch and reports the records SQS must retry. It never
// returns an error: every SQS record's outcome is in the response, so one bad
// record never fails its neighbours.
func (r *Runner) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return r.mux.HandleSQS(ctx, ev)
}

// Handles reports whether this runner has a handler for the job type.
func (r *Runner) Handles(jobType string) bool { return r.mux.Handles(jobType) }

// decode reads a record's body: an envelope, or a recurring schedule's
// tick, whose envelope is derived from it (its job id from the schedule's
// name and the scheduled time). An envelope that breaks its type's
// declaration decodes, with why, so its failure is counted under its type.
func decode(reg *message.Registry, body []byte) (*Payload, error) {
	// An envelope is the common case: parse it once, and probe for a tick
	// only when it is not one.
	env, err := message.Decode(body)
	if err != nil && !message.IsTick(body) {
		return nil, err
	}
	p := new(Payload)
	if err != nil {
		tick, err := message.DecodeTick(body)
		if err != nil {
			return nil, err
		}
		if env, err = reg.TickEnvelope(tick); err != nil {
			return nil, err
		}
		enc, err := env.Encode()
		if err != nil {
			return nil, err
		}
		p.tick, p.encoded = &tick, string(enc)
	}
	p.Envelope = env
	// The type dimension is kept even when the args are invalid.
	if p.Type, p.invalid = reg.Lookup(env.Type); p.invalid == nil {
		p.invalid = p.Type.ValidateArgs(env.Args)
	}
	return p, nil
}

// Work is the engine's work of handler h.
func Work(h Handler) func(context.Context, engine.Job[*Payload]) error {
	return func(ctx context.Context, job engine.Job[*Payload]) error {
		return h.Handle(ctx, Job{Envelope: job.Payload.Envelope, Type: job.Payload.Type, Attempt: job.Attempt, Logger: job.Logger})
	}
}

// KindOf is the engine's kind of job type t of reg: its records' key is
// the job id, its switch the type's, its run time the envelope's runAt.
// Its Decode reads an envelope or a tick (a Mux of the runner decodes with
// its own, the same).
func KindOf(reg *message.Registry, t message.JobType) engine.Kind[*Payload] {
	return engine.Kind[*Payload]{
		Name:   t.Name,
		Decode: func(b []byte) (*Payload, error) { return decode(reg, b) },
		Key: func(p *Payload) (string, error) {
			if p.invalid != nil {
				return "", p.invalid
			}
			return p.Envelope.MessageID, nil
		},
		Bias: t.Bias, Lease: t.Lease, FailClosed: !t.EnabledByDefault, WhileOff: t.WhileOff,
		Due:         func(p *Payload) time.Time { return lifetime.Guard(p.Envelope.RunAt) },
		Traceparent: func(p *Payload) string { return p.Envelope.Traceparent },
		LogAttrs: func(p *Payload) []slog.Attr {
			// The messageId of the envelope is the job id; the SQS message
			// id is the batch item identifier.
			return []slog.Attr{slog.String(obs.KeyJobID, p.Envelope.MessageID), slog.String(obs.KeyMessageID, p.Envelope.MessageID),
				slog.String(obs.KeyType, p.Envelope.Type), slog.String(obs.KeyKey, p.Envelope.Key), slog.String(obs.KeyCorrelationID, p.Envelope.CorrelationID)}
		},
	}
}

// recordTick is a tick kind's Admit: it writes the job record of a tick
// when it is new (Reserve, then Promote: the message is in its queue, this
// worker holds it) and decides whether the record goes on. It stops, done,
// when another job holds the tick's key; it is retried when the key is
// busy, or when the record cannot be written.
func recordTick(ticks TickJobs) func(context.Context, engine.Job[*Payload]) error {
	return func(ctx context.Context, job engine.Job[*Payload]) error {
		p := job.Payload
		d, err := ticks.RecordTick(ctx, TickJob{
			ID: p.Envelope.MessageID, Caller: message.TickCaller(p.tick.Schedule), Type: p.Envelope.Type, Key: p.Envelope.Key,
			Queue: string(p.Type.Queue), CorrelationID: p.Envelope.CorrelationID, TraceID: obs.TraceRoot(engine.TraceHeader(ctx)),
			Message: p.encoded, At: time.Now().UTC(),
		})
		switch {
		case err != nil:
			return fmt.Errorf("the tick's job record could not be written: %w", err)
		case d.Busy:
			return fmt.Errorf("%w: another tick is creating the job of this key", engine.ErrBusy)
		case !d.Own:
			// Another tick of the same key (another scheduled time) holds
			// it: that job does the work.
			return fmt.Errorf("job %s holds the tick's key %s (%w)", d.HolderID, p.Envelope.Key, engine.ErrProcessed)
		case d.Recorded:
			job.Logger.Info("tick: job recorded", "schedule", p.tick.Schedule, "scheduledTime", p.tick.ScheduledTime)
		}
		return nil
	}
}

// JobTraceHeader is the trace a record of job env continues, as an X-Ray
// trace header: the record's AWSTraceHeader, else the traceparent its
// envelope carries (a job that waited in a one-time schedule: EventBridge
// Scheduler sends no trace header) in X-Ray form, else "". The runner's
// record span, its log lines, a parked copy and a dead letter keep it; a
// consumer of the dead-letter queue continues it the same way.
func JobTraceHeader(msg events.SQSMessage, env message.Envelope) string {
	if h := engine.RecordTraceHeader(msg); h != "" {
		return h
	}
	if sc, ok := engine.ParseTraceparent(env.Traceparent); ok {
		return engine.FormatXRay(sc)
	}
	return ""
}

// Attributed wraps a Parker so that a parked copy of a job always carries
// the message attributes the bundle's messages carry (its type and
// correlation id): a record that arrived without them (a one-time
// schedule's message, sent by EventBridge Scheduler) gets them from its
// envelope.
func Attributed(p engine.Parker) engine.Parker { return attributed{p} }

type attributed struct{ engine.Parker }

func (a attributed) Park(ctx context.Context, msg events.SQSMessage, delay time.Duration) error {
	if _, ok := msg.MessageAttributes[sqsqueue.AttrType]; !ok {
		if env, err := message.Decode([]byte(msg.Body)); err == nil {
			attrs := maps.Clone(msg.MessageAttributes)
			if attrs == nil {
				attrs = map[string]events.SQSMessageAttribute{}
			}
			for name, v := range map[string]string{sqsqueue.AttrType: env.Type, sqsqueue.AttrCorrelationID: env.CorrelationID} {
				if v != "" {
					attrs[name] = events.SQSMessageAttribute{DataType: "String", StringValue: &v}
				}
			}
			msg.MessageAttributes = attrs
		}
	}
	return a.Parker.Park(ctx, msg, delay)
}
