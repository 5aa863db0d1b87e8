package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/vclock"
	"github.com/runstwice/runstwice/message"
)

// UnknownType is the metric dimension and recorded type of a dead letter
// whose body names no registered type.
const UnknownType = "unknown"

// Error classes written to the job record.
const (
	ClassPermanent   = "permanent"    // a worker sent it with a reason
	ClassMaxReceives = "max-receives" // the queue's redrive policy moved it
	// ClassScheduler: EventBridge Scheduler could not deliver it to its
	// queue (a one-time job's envelope, a recurring schedule's tick); the
	// job record's class is "scheduler <error code>".
	ClassScheduler = "scheduler"
)

// attrDLQSourceARN is the SQS system attribute AWS sets on a message moved by
// a redrive policy.
const attrDLQSourceARN = "DeadLetterQueueSourceArn"

// Records stores dead letters (*Store is one).
type Records interface {
	SaveDelivery(ctx context.Context, rec Record, sqsMessageID string) (Saved, error)
}

// MarkerPeeker reads effect markers and marks a dead-lettered job's marker
// FAILED, so no other copy of the job runs until a redrive (*dynamostore.Store
// is one).
type MarkerPeeker interface {
	PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error)
	Fail(ctx context.Context, k engine.Key, m engine.Mark) error
}

// JobFailer marks a job Failed, conditionally: it never overwrites a
// cancelled job (*jobs.Recorder is one).
type JobFailer interface {
	MarkFailed(ctx context.Context, jobID string, f jobs.Failure) error
}

// Config wires a Consumer. Records and Markers are required.
type Config struct {
	Records Records
	Markers MarkerPeeker
	// Jobs marks jobs Failed (optional).
	Jobs JobFailer
	// Registry names the known types (required).
	Registry *message.Registry
	Logger   *slog.Logger
	Metrics  *engine.Metrics
	// TracerProvider, when set, makes a CONSUMER span per letter
	// (SpanName), continuing the job's trace the letter carries. nil makes
	// none.
	TracerProvider trace.TracerProvider
}

// Consumer handles batches from the dead-letter queue. It is safe for
// concurrent use and idempotent: running it twice on the same delivery
// stores, counts and alerts once.
type Consumer struct {
	cfg Config
}

// NewConsumer checks cfg and returns a Consumer. It checks its config as
// runner.New does: each names its own required fields.
func NewConsumer(cfg Config) (*Consumer, error) {
	switch {
	case cfg.Records == nil:
		return nil, errors.New("deadletter: Records is required")
	case cfg.Markers == nil:
		return nil, errors.New("deadletter: Markers is required")
	case cfg.Registry == nil:
		return nil, errors.New("deadletter: Registry is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Consumer{cfg: cfg}, nil
}

// letter is one SQS record of the DLQ on its way through the consumer.
type letter struct {
	msg     events.SQSMessage
	rec     Record
	decoded bool
	key     engine.Key
	// due is the job's run time, when its envelope carries one.
	due time.Time
	// marker is the job's marker the batch peek found, when hasMarker.
	marker    engine.Record
	hasMarker bool
	class     string
	// code is the scheduler's error code of a scheduler's letter.
	code string
	// trace is the X-Ray trace header of the job the letter carries
	// (runner.JobTraceHeader).
	trace string
	log   *slog.Logger
}

// Handle records every message of a DLQ batch and reports the ones to retry
// (a store or job-table error). It never returns an error.
func (c *Consumer) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	base := obs.WithRequest(ctx, c.cfg.Logger)
	defer c.cfg.Metrics.Flush()
	letters := make([]letter, len(ev.Records))
	keys := make([]engine.Key, 0, len(ev.Records))
	for i, msg := range ev.Records {
		letters[i] = c.parse(msg, base)
		if letters[i].decoded {
			keys = append(keys, letters[i].key)
		}
	}
	var resp events.SQSEventResponse
	retry := func(l *letter) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: l.msg.MessageId})
	}
	var done map[engine.Key]engine.Record // the batch's markers, by key
	if len(keys) > 0 {
		var err error
		if done, err = c.cfg.Markers.PeekBatch(ctx, keys); err != nil {
			// Without the marker we cannot tell a dead letter from a job that
			// succeeded; retry those rather than guess.
			base.Error("marker peek failed; retrying the batch's envelopes", "error", err)
			for i := range letters {
				if letters[i].decoded {
					_, end := c.span(ctx, &letters[i])
					end(fmt.Errorf("marker peek: %w", err))
					retry(&letters[i])
				}
			}
			letters = slices.DeleteFunc(letters, func(l letter) bool { return l.decoded })
		}
	}
	for i := range letters {
		l := &letters[i]
		// A letter moved by the redrive policy whose marker is claimed had
		// succeeded meanwhile (a twin finished it). A letter a worker sent
		// with a reason failed, whatever the marker says: a claim-then-effect
		// job claims before its effect fails.
		m, ok := done[l.key]
		if l.decoded && ok && m.Processed() && (l.class == ClassMaxReceives || l.class == ClassScheduler) {
			l.rec.Status = StatusSucceeded
		}
		l.marker, l.hasMarker = m, ok
		lctx, end := c.span(ctx, l)
		err := c.record(lctx, l)
		end(err)
		if err != nil {
			l.log.Error("dead letter not recorded; retrying", "error", err)
			retry(l)
		}
	}
	return resp, nil
}

// record stores one letter, marks its job Failed and alerts.
func (c *Consumer) record(ctx context.Context, l *letter) error {
	saved, err := c.cfg.Records.SaveDelivery(ctx, l.rec, l.msg.MessageId)
	if err != nil {
		return err
	}
	isNew := saved.New
	log := l.log.With("deadLetterId", l.rec.ID, "reason", l.rec.Reason, "sourceQueue", l.rec.SourceQueue,
		"receiveCount", l.rec.ReceiveCount, "status", string(l.rec.Status))
	if l.rec.Status == StatusSucceeded {
		if isNew {
			log.Info("message in the DLQ had already succeeded (its marker is claimed); recorded, not a dead letter")
		}
		return nil
	}
	// Counted and alerted once per delivery, right after it is first
	// stored: a failure below retries the record, and the retry finds it
	// stored (isNew false), so counting later would lose the alert.
	if isNew {
		c.cfg.Metrics.Count(engine.DeadLetters, l.rec.Type, 1)
		log.Error("dead letter: job failed and needs a person", "alert", true, "hint", "jobctl dlq redrive "+l.rec.ID)
	}
	if !isNew && saved.Status != l.rec.Status {
		// A retry of a delivery handled before, whose letter an operator
		// has since redriven (or dropped): the redrive made the job active
		// again, and marking it Failed now would undo it.
		log.Info("dead letter was redriven or dropped since this delivery was first handled; its job is left as it is", "storedStatus", string(saved.Status))
		return nil
	}
	// The marker says FAILED too, so a copy of the job still in a queue is
	// dead-lettered rather than run while the job reads Failed (a redrive
	// clears it).
	if l.decoded {
		if err := c.failMarker(ctx, l); err != nil {
			return err
		}
	}
	// Marked on every run, not only the first: a run that crashed after
	// Save must still get the job marked. MarkFailed is conditional.
	if l.decoded && c.cfg.Jobs != nil {
		f := jobs.Failure{Class: l.class, Reason: l.rec.Reason, Attempts: l.rec.ReceiveCount, Due: l.due}
		if l.code != "" {
			f.Class += " " + l.code
		}
		if err := c.cfg.Jobs.MarkFailed(ctx, l.rec.JobID, f); err != nil {
			if !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrConflict) {
				return fmt.Errorf("mark job failed: %w", err)
			}
			// Sent outside the API, expired, or cancelled meanwhile.
			log.Info("dead letter has no job record to mark Failed", obs.KeyReason, obs.Redact(err))
		}
	}
	return nil
}

// failMarker marks the letter's job FAILED on its marker, unless the marker
// already settles it (done, failed, cancelled). A marker leased by a live
// worker (another copy of the job is running right now) retries the letter:
// that copy's outcome decides, and the next delivery sees it.
func (c *Consumer) failMarker(ctx context.Context, l *letter) error {
	now := time.Now()
	switch {
	case l.hasMarker && l.marker.Settled():
		return nil
	case l.hasMarker && l.marker.LeaseActive(now):
		return fmt.Errorf("a worker holds the job's lease; retried once it is done")
	}
	if err := c.cfg.Markers.Fail(ctx, l.key, engine.Mark{Expires: lifetime.Until(vclock.Now(), l.due, lifetime.Marker)}); err != nil {
		return fmt.Errorf("mark the job's marker FAILED: %w", err)
	}
	return nil
}

// parse derives the record of one DLQ message: its job (an envelope, or
// a tick's derived envelope), then why it is here (a scheduler's letter, a
// worker's reason, or the queue's redrive policy) and where from.
func (c *Consumer) parse(msg events.SQSMessage, base *slog.Logger) letter {
	l := letter{msg: msg, log: base.With(obs.KeyJobID, msg.MessageId, obs.KeyMessageID, msg.MessageId)}
	l.rec = Record{ID: msg.MessageId, Type: UnknownType, Body: msg.Body, Status: StatusDead}
	c.parseJob(&l, base)
	rec := &l.rec
	// The trace the message carries (SQS keeps AWSTraceHeader when it moves
	// a message to the DLQ, and the worker sends its job's with a letter),
	// kept for a redrive to send again.
	rec.TraceHeader = engine.RecordTraceHeader(msg)
	if l.trace == "" {
		l.trace = rec.TraceHeader
	}
	if trace := obs.TraceRoot(l.trace); trace != "" {
		l.log = l.log.With(obs.KeyTraceID, trace)
	}
	if sl, ok := schedule.LetterOf(stringAttrs(msg)); ok {
		// EventBridge Scheduler could not deliver it: its error code (never
		// its ERROR_MESSAGE, the provider's text), its tries, the target
		// queue as the source, and the schedule's name.
		rec.Reason, rec.ReceiveCount, rec.SourceQueue = sl.Reason(), sl.Attempts(), sl.TargetARN
		// A body the scheduler cut is not its input: never sent back as it is.
		rec.BodyTruncated = sl.Truncated
		l.class, l.code = ClassScheduler, sl.Code
		if rec.Schedule == "" {
			rec.Schedule = sl.Schedule
		}
		l.log = l.log.With("schedule", rec.Schedule, "errorCode", sl.Code)
	} else {
		rec.ReceiveCount = c.receiveCount(msg)
		if reason := stringAttr(msg, sqsqueue.AttrReason); reason != "" {
			rec.Reason, l.class = reason, ClassPermanent
		} else {
			rec.Reason = fmt.Sprintf("exceeded maxReceiveCount (%d receives)", rec.ReceiveCount)
			l.class = ClassMaxReceives
		}
		rec.SourceQueue = stringAttr(msg, sqsqueue.AttrSourceQueue)
		if rec.SourceQueue == "" {
			rec.SourceQueue = msg.Attributes[attrDLQSourceARN]
		}
	}
	if rec.SourceQueue == "" && rec.Type != UnknownType {
		t, _ := c.cfg.Registry.Lookup(rec.Type)
		rec.SourceQueue = string(t.Queue)
	}
	// Bounded here, not only when stored: the job's Failed mark and the
	// log lines carry the same reason.
	l.rec = Fit(l.rec)
	return l
}

// parseJob finds the job of the letter's body: an envelope's, or a
// recurring schedule's tick's (the job id, type and key the worker derives
// from it; the letter is then named by its schedule too). A body that is
// neither keeps the SQS message id and the type unknown.
func (c *Consumer) parseJob(l *letter, base *slog.Logger) {
	msg, rec := l.msg, &l.rec
	env, err := message.Decode([]byte(msg.Body))
	if err != nil && message.IsTick([]byte(msg.Body)) {
		tick, terr := message.DecodeTick([]byte(msg.Body))
		if terr != nil {
			l.log = l.log.With(obs.KeyType, UnknownType)
			return
		}
		rec.Schedule = tick.Schedule
		if env, err = c.cfg.Registry.TickEnvelope(tick); err != nil {
			l.log = l.log.With(obs.KeyType, UnknownType, "schedule", tick.Schedule)
			return
		}
	}
	if err != nil {
		l.log = l.log.With(obs.KeyType, UnknownType)
		return
	}
	l.decoded = true
	l.key, l.due = engine.Key{Type: env.Type, JobID: env.MessageID}, env.RunAt
	l.trace = runner.JobTraceHeader(msg, env)
	rec.ID, rec.JobID, rec.CorrelationID = env.MessageID, env.MessageID, env.CorrelationID
	if _, lerr := c.cfg.Registry.Lookup(env.Type); lerr == nil {
		rec.Type = env.Type
	}
	l.log = base.With(obs.KeyJobID, env.MessageID, obs.KeyMessageID, env.MessageID, obs.KeyCorrelationID, env.CorrelationID, obs.KeyType, env.Type,
		obs.KeyKey, env.Key, "sqsMessageId", msg.MessageId)
}

// receiveCount is the number of deliveries before the message was
// dead-lettered: the worker's receiveCount attribute, else the SQS receive
// count, which a redrive move carries over, less this DLQ delivery.
func (c *Consumer) receiveCount(msg events.SQSMessage) int {
	if n, err := strconv.Atoi(stringAttr(msg, sqsqueue.AttrReceiveCount)); err == nil && n > 0 {
		return n
	}
	n, err := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	switch {
	case err != nil || n < 1:
		return 0
	case n > 1:
		return n - 1
	}
	return n
}

// stringAttrs is every string message attribute of msg, by name.
func stringAttrs(msg events.SQSMessage) map[string]string {
	out := make(map[string]string, len(msg.MessageAttributes))
	for name, a := range msg.MessageAttributes {
		if a.StringValue != nil {
			out[name] = *a.StringValue
		}
	}
	return out
}

func stringAttr(msg events.SQSMessage, name string) string {
	if a, ok := msg.MessageAttributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}
