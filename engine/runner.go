// Package engine runs jobs safely under at-least-once delivery: its Runner
// is the per-record pipeline every job goes through, with no exceptions
// (docs/md, "The runner"):
//
//  1. decode and validate the envelope; malformed or unknown type is a
//     permanent failure, sent to the DLQ with its reason;
//  2. kill switch; a disabled job is parked (its record says Parked, and the
//     message is re-sent with a delay under the same messageId) and the
//     original succeeds;
//  3. peek the markers (one consistent BatchGetItem for the whole batch);
//     already processed or cancelled succeeds without touching anything
//     else;
//  4. lease (per type) so a concurrent twin does not run the effect too;
//  5. load and 6. effect (the type's Handler);
//  7. claim the marker under a context cancellation cannot stop, with its
//     own short deadline, retried within the invocation; "already exists" is
//     success;
//  8. failures: transient ones become batch item failures (SQS retries
//     them), backed off by a growing, jittered visibility timeout
//     (Config.Backoff, backoff.go); permanent ones go straight to the DLQ,
//     the final attempt marks the job Failed first; a cancelled context is
//     a retry, not a failure;
//  9. an effect that completed is never re-run on purpose: when its claim
//     still fails, the record is reported done, logged and counted
//     (ClaimFailed). Under claim-then-effect an effect that fails after its
//     claim is dead-lettered and its marker says FAILED until a redrive.
//
// The records of a batch run concurrently (bounded by Config.Concurrency)
// after the one batched peek, so a batch takes about as long as its slowest
// record. Each record ends with exactly one outcome: one log line, its
// metrics (outcome.go) and, for a retry, a batch item failure.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/internal/obs"
)

func (r *Runner) at(s Step) {
	if r.cfg.AtStep != nil {
		r.cfg.AtStep(s)
	}
}

// Runner runs SQS batches of jobs. It is safe for concurrent use.
type Runner struct {
	cfg Config
	// tracer makes the records' spans (nil: Config.TracerProvider is), and
	// spanNames are their names by queue.
	tracer    trace.Tracer
	spanNames map[Queue]string
}

// Handles reports whether this runner has a handler for the job type.
func (r *Runner) Handles(jobType string) bool { return r.cfg.Handlers[jobType] != nil }

// item is one record on its way through the pipeline.
type item struct {
	msg  events.SQSMessage
	env  Envelope
	typ  JobType
	key  Key
	log  *slog.Logger
	seen Record // the batch peek's marker, when hasSeen
	// hasSeen: the peek found a marker; peeked: the peek ran.
	hasSeen, peeked bool
	// disabled: the type's kill switch is off.
	disabled bool
	// tick is the tick the record carried instead of an envelope (nil for
	// an envelope); encoded is the envelope derived from it.
	tick    *Tick
	encoded string
	out     outcome
	// retryIn is how long a retry was postponed (Backoff), 0 if it was not.
	retryIn time.Duration
	// trace is the X-Ray trace header the record continues (JobTraceHeader).
	trace string
}

// metricType is the type dimension of the record's metrics: its type when
// it names a registered one, else "unknown".
func (it *item) metricType() string {
	if it.typ.Name != "" {
		return it.typ.Name
	}
	return "unknown"
}

// Handle runs a batch and reports the records SQS must retry. It never
// returns an error: every record's fate is in the response, so one bad
// record never fails its neighbours.
func (r *Runner) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer r.cfg.Metrics.Flush()
	start := time.Now() // the real clock, as SQS counts a receipt's 12 h
	base := obs.WithRequest(ctx, r.cfg.Logger)
	// Leases last until the real deadline; the work stops a margin before
	// it, so the response (and with it every success) reaches SQS.
	leaseUntil := r.leaseUntil(ctx)
	var stop time.Time // when the batch stops waiting for its records (zero: no deadline)
	if d, ok := ctx.Deadline(); ok {
		stop = d.Add(-r.cfg.DeadlineMargin / waitStopShare)
		ctx = withWriteStop(ctx, d.Add(-r.cfg.DeadlineMargin/writeStopShare))
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-r.cfg.DeadlineMargin))
		defer cancel()
	}
	items := make([]item, len(ev.Records))
	// One random token per invocation names each record's lease and claim
	// (token:index): unique across workers, cheap per record.
	batch := uuid.NewString()
	var toPeek []*item
	for i := range ev.Records {
		it := &items[i]
		it.msg = ev.Records[i]
		if !r.decode(ctx, base, it) {
			continue
		}
		// Step 2 first: the switch decides whether the job may run. A
		// disabled record is peeked too, so a late copy of a job that is
		// done or cancelled is dropped instead of parked again and again
		// (its marker expires in 30 days; a switch can stay off longer).
		it.disabled = !r.cfg.Switch.IsJobEnabled(ctx, it.typ.Name, it.typ.EnabledByDefault)
		toPeek = append(toPeek, it)
	}
	r.at(StepAfterDecode)
	r.peek(ctx, base, toPeek)

	limit := r.cfg.Concurrency
	if limit <= 0 {
		limit = len(items)
	}
	r.runAll(ctx, items, limit, stop, func(i int, it *item) outcome {
		if ctx.Err() != nil {
			// Nothing starts after the deadline margin.
			return outcome{kind: kindInterrupted, reason: "the invocation's deadline came first", err: ctx.Err()}
		}
		owner := batch + ":" + strconv.Itoa(i)
		if r.tracer == nil {
			return r.process(ctx, it, leaseUntil, owner)
		}
		return r.traced(ctx, it, func(ctx context.Context) outcome { return r.process(ctx, it, leaseUntil, owner) })
	})

	r.backOff(ctx, base, items, start)
	var resp events.SQSEventResponse
	for i := range items {
		r.finish(ctx, &items[i], &resp)
	}
	r.at(StepBeforeResponse)
	return resp, nil
}

// runAll runs do for every pending record, at most limit at once, and sets
// each record's outcome. A record whose goroutine panics ends as a retry
// (kindPending) with the panic logged; its neighbours are untouched. When
// stop is set, runAll returns by then even if a record is still running (a
// handler that ignores its context): such a record is retried, and what its
// goroutine decides later is dropped.
func (r *Runner) runAll(ctx context.Context, items []item, limit int, stop time.Time, do func(int, *item) outcome) {
	sem := make(chan struct{}, max(limit, 1))
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex // guards every it.out below, and abandoned
		abandoned bool
	)
	set := func(it *item, o outcome) {
		mu.Lock()
		defer mu.Unlock()
		if !abandoned {
			it.out = o
		}
	}
	for i := range items {
		it := &items[i]
		if it.out.kind != kindPending {
			continue
		}
		wg.Add(1)
		r.goRecord(func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			defer func() {
				if v := recover(); v != nil {
					it.log.Error("the runner panicked on this record; it is retried", "panic", panicText(v), "stack", string(debug.Stack()))
					set(it, outcome{kind: kindPending, reason: "the runner panicked on it; SQS retries it", err: &PanicError{Value: panicText(v)}})
				}
			}()
			set(it, do(i, it))
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if stop.IsZero() {
		<-done
		return
	}
	timer := time.NewTimer(time.Until(stop))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		mu.Lock()
		abandoned = true
		mu.Unlock()
		for i := range items {
			if it := &items[i]; it.out.kind == kindPending && it.log != nil {
				it.log.Error("record still running at the deadline; it is retried")
			}
		}
	}
}

// decode runs step 1 for one record and reports whether it goes on.
func (r *Runner) decode(ctx context.Context, base *slog.Logger, it *item) bool {
	env, err := r.decodeBody(it)
	it.trace = JobTraceHeader(it.msg, env)
	if err == nil {
		// The messageId of the envelope is the job id; the SQS message id
		// is the batch item identifier.
		attrs := []slog.Attr{slog.String(obs.KeyJobID, env.MessageID), slog.String(obs.KeyMessageID, env.MessageID), slog.String(obs.KeyType, env.Type),
			slog.String(obs.KeyKey, env.Key), slog.String(obs.KeyCorrelationID, env.CorrelationID),
			slog.String("sqsMessageId", it.msg.MessageId)}
		if trace := obs.TraceRoot(it.trace); trace != "" {
			attrs = append(attrs, slog.String(obs.KeyTraceID, trace))
		}
		it.log = slog.New(base.Handler().WithAttrs(attrs))
		it.typ, err = r.cfg.Registry.Validate(env)
		if t, lerr := r.cfg.Registry.Lookup(env.Type); lerr == nil {
			it.typ = t // the type dimension, even when its args are invalid
		}
	} else {
		it.log = base.With("sqsMessageId", it.msg.MessageId)
	}
	if err == nil && r.cfg.Handlers[env.Type] == nil {
		err = fmt.Errorf("%w: no handler for %s in this function", ErrUnknownType, env.Type)
	}
	if err != nil {
		it.out = r.deadLetter(ctx, it, err)
		return false
	}
	it.env = env
	it.key = Key{Type: env.Type, JobID: env.MessageID}
	return true
}

// decodeBody decodes the record's body: an envelope, or a recurring
// schedule's tick, whose envelope is derived from it (its job id from the
// schedule's name and the scheduled time).
func (r *Runner) decodeBody(it *item) (Envelope, error) {
	body := []byte(it.msg.Body)
	// An envelope is the common case: parse it once, and probe for a tick
	// only when it is not one.
	env, err := Decode(body)
	if err == nil || !IsTick(body) {
		return env, err
	}
	tick, err := DecodeTick(body)
	if err != nil {
		return Envelope{}, err
	}
	env, err = r.cfg.Registry.TickEnvelope(tick)
	if err != nil {
		return Envelope{}, err
	}
	enc, err := env.Encode()
	if err != nil {
		return Envelope{}, err
	}
	it.tick, it.encoded = &tick, string(enc)
	return env, nil
}

// peek runs step 3 for the whole batch with one read. A failed peek is not
// fatal: the lease is conditional and doubles as a peek, so records of types
// with a lease go on; the others are retried rather than run blind.
func (r *Runner) peek(ctx context.Context, base *slog.Logger, its []*item) {
	if len(its) == 0 {
		return
	}
	keys := make([]Key, len(its))
	for i, it := range its {
		keys[i] = it.key
	}
	seen, err := r.cfg.Markers.PeekBatch(ctx, keys)
	if err != nil {
		base.Warn("marker peek failed; records with a lease go on, the others are retried", obs.KeyError, obs.Redact(err))
		return
	}
	for _, it := range its {
		it.seen, it.hasSeen = seen[it.key]
		it.peeked = true
	}
}

// writeStopKey carries, in an invocation's context, the time by which every
// write must have ended.
type writeStopKey struct{}

func withWriteStop(ctx context.Context, stop time.Time) context.Context {
	return context.WithValue(ctx, writeStopKey{}, stop)
}

// writeStop is the time by which every write of the invocation must have
// ended; ok is false when the invocation has no deadline.
func writeStop(ctx context.Context) (time.Time, bool) {
	stop, ok := ctx.Value(writeStopKey{}).(time.Time)
	return stop, ok
}

// leaseUntil is the Lambda deadline: a crash never holds the lease longer.
func (r *Runner) leaseUntil(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return r.cfg.Now().Add(DefaultLease)
}
