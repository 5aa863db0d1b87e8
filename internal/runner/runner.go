// Package runner is the per-record pipeline every job goes through, with no
// exceptions (DESIGN §2):
//
//  1. decode and validate the envelope; malformed or unknown type is a
//     permanent failure, sent to the DLQ with its reason;
//  2. kill switch; a disabled job is parked (re-sent with a delay under the
//     same messageId) and the original succeeds;
//  3. peek the marker (one consistent BatchGetItem for the whole batch);
//     already processed succeeds without touching anything else;
//  4. lease (per type) so a concurrent twin does not run the effect too;
//  5. load and 6. effect (the type's Handler);
//  7. claim the marker under a context cancellation cannot stop;
//  8. failures: transient ones become batch item failures (SQS retries
//     them), permanent ones go straight to the DLQ, the final attempt marks
//     the job Failed first; a cancelled context is a retry, not a failure.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/queue"
)

// Defaults of Config.
const (
	DefaultParkDelay       = 900 * time.Second // SQS's maximum DelaySeconds
	DefaultMaxReceiveCount = 5
	DefaultLease           = 5 * time.Minute // when the context has no deadline
	// DefaultDeadlineMargin is kept free before the Lambda deadline so the
	// batch response always gets back: work still running then is
	// cancelled and retried, work not started is not started.
	DefaultDeadlineMargin = 2 * time.Second
)

// Job is what a Handler gets: the validated envelope and its type.
type Job struct {
	Envelope contract.Envelope
	Type     contract.JobType
	// Attempt is the SQS receive count of this delivery (1 for the first).
	Attempt int
	// Logger carries correlationId, messageId, type and the request id.
	Logger *slog.Logger
}

// Config wires a Runner. Registry, Handlers, Toggles and Markers are required.
type Config struct {
	Registry *contract.Registry
	// Handlers maps a type name to its Handler. A registered type with no
	// handler in this function is a permanent failure.
	Handlers map[string]Handler
	Toggles  Toggles
	Markers  Markers
	Parker   Parker
	// DeadLetterer receives permanent failures. Without one they stay batch
	// item failures and reach the DLQ through the queue's redrive policy.
	DeadLetterer DeadLetterer
	// Failures marks jobs Failed on their final attempt (optional).
	Failures FailureRecorder
	// ParkDelay is how long a disabled job waits before it is looked at again
	// (DefaultParkDelay if 0, capped at 900 s).
	ParkDelay time.Duration
	// MaxReceiveCount is the work queues' redrive maxReceiveCount: the
	// delivery with this receive count is the final attempt.
	MaxReceiveCount int
	// DeadlineMargin is kept free before the invocation's deadline
	// (DefaultDeadlineMargin if 0).
	DeadlineMargin time.Duration
	Logger         *slog.Logger
	Metrics        *obs.Metrics
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Runner runs SQS batches of jobs. It is safe for concurrent use.
type Runner struct {
	cfg Config
}

// New checks cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("runner: Registry is required")
	case cfg.Toggles == nil:
		return nil, errors.New("runner: Toggles is required")
	case cfg.Markers == nil:
		return nil, errors.New("runner: Markers is required")
	case cfg.Parker == nil:
		return nil, errors.New("runner: Parker is required")
	}
	for name := range cfg.Handlers {
		if _, err := cfg.Registry.Lookup(name); err != nil {
			return nil, fmt.Errorf("runner: handler for %w", err)
		}
	}
	if cfg.ParkDelay <= 0 || cfg.ParkDelay > DefaultParkDelay {
		cfg.ParkDelay = DefaultParkDelay
	}
	if cfg.MaxReceiveCount <= 0 {
		cfg.MaxReceiveCount = DefaultMaxReceiveCount
	}
	if cfg.DeadlineMargin <= 0 {
		cfg.DeadlineMargin = DefaultDeadlineMargin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg}, nil
}

// outcome is what happened to one record.
type outcome int

const (
	pending outcome = iota
	succeeded
	duplicate
	parked
	deadLettered
	retry
)

// item is one record on its way through the pipeline.
type item struct {
	msg    events.SQSMessage
	env    contract.Envelope
	typ    contract.JobType
	key    marker.Key
	log    *slog.Logger
	result outcome
}

// Handle runs a batch and reports the records SQS must retry. It never
// returns an error: every record's fate is in the response, so one bad
// record never fails its neighbours.
func (r *Runner) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	base := obs.WithRequest(ctx, r.cfg.Logger)
	defer r.cfg.Metrics.Flush()
	// Leases last until the real deadline; the work stops a margin before
	// it, so the response (and with it every success) reaches SQS.
	leaseUntil := r.leaseUntil(ctx)
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-r.cfg.DeadlineMargin))
		defer cancel()
	}
	items := make([]item, len(ev.Records))
	keys := make([]marker.Key, 0, len(ev.Records))
	for i := range ev.Records {
		it := &items[i]
		it.msg = ev.Records[i]
		if !r.decode(ctx, base, it) || !r.enabled(ctx, it) {
			continue
		}
		keys = append(keys, it.key)
	}

	// 3. Peek: one consistent read for the whole batch. A failed peek is not
	// fatal: the lease and the claim are conditional and still converge.
	var seen map[marker.Key]marker.Record
	if len(keys) > 0 {
		var err error
		if seen, err = r.cfg.Markers.PeekBatch(ctx, keys); err != nil {
			base.Warn("marker peek failed; continuing on conditional writes", "error", err)
		}
	}

	var resp events.SQSEventResponse
	for i := range items {
		it := &items[i]
		if it.result == pending {
			if rec, ok := seen[it.key]; ok && rec.Processed() {
				it.result = duplicate
				it.log.Info("job already processed; skipped")
				r.cfg.Metrics.Count(obs.JobsDuplicate, it.typ.Name, 1)
			} else {
				it.result = r.run(ctx, it, leaseUntil)
			}
		}
		if it.result == retry {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: it.msg.MessageId})
		}
	}
	return resp, nil
}

// decode runs step 1. It reports whether the record goes on.
func (r *Runner) decode(ctx context.Context, base *slog.Logger, it *item) bool {
	env, err := contract.Decode([]byte(it.msg.Body))
	if err == nil {
		// The messageId logged is the job id; the SQS message id is the
		// batch item identifier.
		it.log = base.With(obs.KeyJobID, env.MessageID, obs.KeyCorrelationID, env.CorrelationID, obs.KeyType, env.Type)
		it.typ, err = r.cfg.Registry.Validate(env)
	} else {
		it.log = base.With("sqsMessageId", it.msg.MessageId)
	}
	if err == nil && r.cfg.Handlers[env.Type] == nil {
		err = fmt.Errorf("%w: no handler for %s in this function", contract.ErrUnknownType, env.Type)
	}
	if err != nil {
		jobType := "unknown"
		if _, lerr := r.cfg.Registry.Lookup(env.Type); lerr == nil {
			jobType = env.Type
		}
		it.result = r.deadLetter(ctx, it, jobType, err)
		return false
	}
	it.env = env
	it.key = marker.Key{Handler: env.Type, MessageKey: env.MessageID}
	return true
}

// enabled runs step 2. It reports whether the record goes on.
func (r *Runner) enabled(ctx context.Context, it *item) bool {
	if r.cfg.Toggles.IsJobEnabled(ctx, it.typ.Name, it.typ.EnabledByDefault) {
		return true
	}
	r.cfg.Metrics.Count(obs.JobsSkipped, it.typ.Name, 1)
	if err := r.cfg.Parker.Park(ctx, it.typ.Queue, it.env, it.msg.Body, r.cfg.ParkDelay); err != nil {
		it.log.Error("job disabled by its kill switch and could not be parked; retrying", "error", err)
		it.result = retry
		return false
	}
	it.log.Warn("job disabled by its kill switch; parked", "delay", r.cfg.ParkDelay.String())
	r.cfg.Metrics.Count(obs.JobsParked, it.typ.Name, 1)
	it.result = parked
	return false
}

// run runs steps 4 to 8 for one record.
func (r *Runner) run(ctx context.Context, it *item, leaseUntil time.Time) outcome {
	if ctx.Err() != nil {
		return r.fail(ctx, it, ctx.Err())
	}
	// Claim and release must happen even when the invocation's context is
	// cancelled after the effect: the effect has happened.
	bg := context.WithoutCancel(ctx)
	owner := ""
	if it.typ.Lease {
		owner = uuid.NewString()
		if _, err := r.cfg.Markers.Lease(ctx, it.key, owner, leaseUntil); err != nil {
			switch {
			case errors.Is(err, marker.ErrProcessed):
				it.log.Info("job already processed; skipped")
				r.cfg.Metrics.Count(obs.JobsDuplicate, it.typ.Name, 1)
				return duplicate
			case errors.Is(err, marker.ErrLeaseHeld):
				return r.fail(ctx, it, ErrBusy)
			}
			return r.fail(ctx, it, err)
		}
	}
	job := Job{Envelope: it.env, Type: it.typ, Attempt: queue.ReceiveCount(it.msg), Logger: it.log}
	handler := r.cfg.Handlers[it.typ.Name]

	if it.typ.Bias == contract.ClaimThenEffect {
		won, err := r.cfg.Markers.Claim(bg, it.key, owner)
		if err != nil && !errors.Is(err, marker.ErrLeaseLost) {
			r.release(bg, it, owner)
			return r.fail(ctx, it, err)
		}
		if !won || err != nil {
			it.log.Info("job already claimed; skipped")
			r.cfg.Metrics.Count(obs.JobsDuplicate, it.typ.Name, 1)
			return duplicate
		}
		if err := handler.Handle(ctx, job); err != nil {
			// Claimed first, so a retry would skip it: the effect is lost
			// unless a person looks. Never drop it silently.
			return r.deadLetter(ctx, it, it.typ.Name, fmt.Errorf("effect failed after claim (claim-then-effect): %w", err))
		}
		return r.succeed(it)
	}

	if err := handler.Handle(ctx, job); err != nil {
		r.release(bg, it, owner)
		return r.fail(ctx, it, err)
	}
	won, err := r.cfg.Markers.Claim(bg, it.key, owner)
	if err != nil {
		if errors.Is(err, marker.ErrLeaseLost) {
			// Our lease expired and a twin took over; our effect stands and
			// the twin completes the marker. Duplicates over loss.
			it.log.Warn("lease lost before claim; effect may have run twice", "error", err)
			return r.succeed(it)
		}
		// The effect ran but is not recorded: a retry repeats it
		// (duplicates over loss). The lease expires by itself.
		return r.fail(ctx, it, fmt.Errorf("claim after effect: %w", err))
	}
	if !won {
		// A twin claimed first (no lease, or ours expired): the effect ran
		// twice. Duplicates over loss, counted as such.
		it.log.Warn("marker already claimed by a twin; effect may have run twice")
		r.cfg.Metrics.Count(obs.JobsDuplicate, it.typ.Name, 1)
		return duplicate
	}
	return r.succeed(it)
}

func (r *Runner) succeed(it *item) outcome {
	it.log.Info("job succeeded")
	r.cfg.Metrics.Count(obs.JobsSucceeded, it.typ.Name, 1)
	return succeeded
}

func (r *Runner) release(ctx context.Context, it *item, owner string) {
	if owner == "" {
		return
	}
	if err := r.cfg.Markers.Release(ctx, it.key, owner); err != nil {
		it.log.Warn("lease release failed; it expires by itself", "error", err)
	}
}

// fail decides the fate of a failed record (step 8).
func (r *Runner) fail(ctx context.Context, it *item, err error) outcome {
	switch {
	case IsPermanent(err):
		return r.deadLetter(ctx, it, it.typ.Name, err)
	case isCancellation(ctx, err):
		it.log.Warn("job interrupted by the deadline; retrying", "error", err)
		return retry
	case errors.Is(err, ErrBusy):
		it.log.Info("job leased by a concurrent twin; retrying later")
		return retry
	}
	attempt := queue.ReceiveCount(it.msg)
	if attempt >= r.cfg.MaxReceiveCount {
		it.log.Error("job failed on its final attempt", "error", err, "attempt", attempt)
		if r.cfg.Failures != nil {
			if ferr := r.cfg.Failures.MarkFailed(context.WithoutCancel(ctx), it.env.MessageID, ErrorClass(err)); ferr != nil {
				it.log.Error("could not mark job Failed", "error", ferr)
			}
		}
	} else {
		it.log.Warn("job failed; retrying", "error", err, "attempt", attempt)
	}
	r.cfg.Metrics.Count(obs.JobsFailed, it.typ.Name, 1)
	return retry
}

// deadLetter sends a record that can never succeed to the DLQ with its
// reason. If that send fails the record is retried, never dropped.
func (r *Runner) deadLetter(ctx context.Context, it *item, jobType string, reason error) outcome {
	r.cfg.Metrics.Count(obs.JobsFailed, jobType, 1)
	if r.cfg.DeadLetterer == nil {
		it.log.Error("job failed permanently; leaving it to the redrive policy", "error", reason)
		return retry
	}
	if err := r.cfg.DeadLetterer.DeadLetter(context.WithoutCancel(ctx), it.msg, reason.Error()); err != nil {
		it.log.Error("job failed permanently and could not be dead-lettered; retrying", "error", reason, "sendError", err)
		return retry
	}
	it.log.Error("job failed permanently; sent to the dead-letter queue", "error", reason)
	return deadLettered
}

// leaseUntil is the Lambda deadline: a crash never holds the lease longer.
func (r *Runner) leaseUntil(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return r.cfg.Now().Add(DefaultLease)
}
