package engine

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Options.
const (
	DefaultParkDelay       = 900 * time.Second // SQS's maximum DelaySeconds
	DefaultMaxReceiveCount = 5
	DefaultLease           = 5 * time.Minute // when the context has no deadline
	// DefaultDeadlineMargin is kept free before the Lambda deadline so the
	// batch response always gets back: work still running then is
	// cancelled and retried, work not started is not started.
	DefaultDeadlineMargin = 2 * time.Second
	// DefaultWriteTimeout bounds each claim, release and failure write,
	// which run under a context cancellation cannot stop.
	DefaultWriteTimeout = 3 * time.Second
	// DefaultClaimAttempts is how often a claim is tried within the
	// invocation before the effect is reported done without it.
	DefaultClaimAttempts = 3
)

// Past the deadline margin, writes still run (a claim after a finished
// effect, a dead letter, a Failed mark), but each ends by the real deadline
// less a quarter of the margin (writeStopShare), and the batch waits for its
// records until the deadline less an eighth (waitStopShare): the records
// settle their outcomes in between, and the response still gets back.
const (
	writeStopShare = 4
	waitStopShare  = 8
)

// Options wire a Handler (or a Mux). Only Store is required.
type Options struct {
	// Store keeps the markers (memstore in tests, dynamostore in
	// production). Required.
	Store Store
	// Switch is the kill switch, read first for every record (nil: every
	// kind is on). Package ssmswitch reads it from SSM Parameter Store.
	Switch Switch
	// Parker re-sends a record whose switch is off (or that snoozed) to its
	// queue with a delay. Required with a Switch when a kind parks while off.
	Parker Parker
	// DeadLetterer receives permanent failures with their reasons. Without
	// one they stay batch item failures and reach the DLQ through the
	// queue's redrive policy.
	DeadLetterer DeadLetterer
	// Recorder writes what the runner learns onto your own record of a job,
	// keyed by the job's key: parked, failed on its final attempt, done
	// without work (optional).
	Recorder JobRecorder
	// Backoff postpones transient retries by a growing, jittered
	// BackoffSchedule (optional: without it they come back after the
	// queue's visibility timeout).
	Backoff         Backoff
	BackoffSchedule BackoffSchedule
	// Random returns a value in [0, n): the back-off's jitter (rand.Int64N
	// if nil).
	Random func(n int64) int64
	// Retention is how long a done marker guards its key
	// (DefaultRetention, 30 days, if 0): longer than a message can live in
	// its queue and its dead-letter queue.
	Retention time.Duration
	// DoneCache keeps up to this many done keys in the execution
	// environment, so a duplicate of one is dropped without a read (0: no
	// cache). A key leaves it when its marker would expire.
	DoneCache int
	// ParkDelay is how long a switched-off record waits before it is looked
	// at again (DefaultParkDelay if 0, capped at 900 s).
	ParkDelay time.Duration
	// MaxReceiveCount is the queue's redrive maxReceiveCount: the delivery
	// with this receive count is the final attempt.
	MaxReceiveCount int
	// Concurrency bounds how many records of a batch run at once (the batch
	// size if 0).
	Concurrency int
	// DeadlineMargin is kept free before the invocation's deadline
	// (DefaultDeadlineMargin if 0).
	DeadlineMargin time.Duration
	// WriteTimeout bounds each claim, release and failure write
	// (DefaultWriteTimeout if 0).
	WriteTimeout time.Duration
	// ClaimAttempts is how often a claim is tried (DefaultClaimAttempts if
	// 0).
	ClaimAttempts int
	// Logger gets one line per record's outcome (slog.Default if nil).
	Logger *slog.Logger
	// Metrics counts the outcomes as CloudWatch EMF (nil: none).
	Metrics *Metrics
	// TracerProvider, when set, makes a CONSUMER span per record
	// (spans.go); nil makes none and costs nothing. The engine uses the
	// OpenTelemetry API only: the SDK, its exporter and its flush are the
	// caller's.
	TracerProvider trace.TracerProvider
	// QueueName names a record's queue in its span, given the record and
	// its kind's name (nil: the queue's name in its EventSourceARN).
	QueueName func(msg events.SQSMessage, kind string) string
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// AtStep, when set, is called at each step boundary of the batch and
	// its records (Step): a test or a fault-injection build hooks in there.
	// Nil in production.
	AtStep func(Step)
	// Go, when set, starts each record's work instead of the process's
	// kept workers (workers.go). Nil in production.
	Go func(f func())
}

// Step names a boundary of a batch's life where Options.AtStep is called.
type Step string

// The step boundaries, in the order a job meets them.
const (
	StepAfterDecode    Step = "after-decode"    // every record of the batch decoded, its switch read
	StepAfterLease     Step = "after-lease"     // a record's lease taken
	StepAfterEffect    Step = "after-effect"    // a record's work returned
	StepAfterClaim     Step = "after-claim"     // a record's marker claimed
	StepBeforeResponse Step = "before-response" // the batch response built, not yet returned
)

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Store == nil {
		return o, errors.New("engine: Options.Store is required")
	}
	if o.ParkDelay <= 0 || o.ParkDelay > DefaultParkDelay {
		o.ParkDelay = DefaultParkDelay
	}
	o.MaxReceiveCount = positiveOr(o.MaxReceiveCount, DefaultMaxReceiveCount)
	o.DeadlineMargin = positiveOr(o.DeadlineMargin, DefaultDeadlineMargin)
	o.WriteTimeout = positiveOr(o.WriteTimeout, DefaultWriteTimeout)
	o.ClaimAttempts = positiveOr(o.ClaimAttempts, DefaultClaimAttempts)
	o.Retention = positiveOr(o.Retention, DefaultRetention)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.BackoffSchedule = o.BackoffSchedule.withDefaults()
	if o.Random == nil {
		o.Random = rand.Int64N
	}
	if o.QueueName == nil {
		o.QueueName = queueOfARN
	}
	return o, nil
}

// positiveOr is v, or def when v is not positive (an Options field left
// zero, or set below zero).
func positiveOr[T ~int | ~int32 | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
