package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/trace"
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

// Config wires a Runner. Registry, Handlers, Toggles, Markers and Parker are
// required.
type Config struct {
	Registry *Registry
	// Handlers maps a type name to its Handler. A registered type with no
	// handler in this function is a permanent failure.
	Handlers map[string]Handler
	Switch   Switch
	Markers  Store
	Parker   Parker
	// DeadLetterer receives permanent failures. Without one they stay batch
	// item failures and reach the DLQ through the queue's redrive policy.
	DeadLetterer DeadLetterer
	// Jobs records parks, final failures and no-op reasons on job records
	// (optional).
	Jobs JobRecorder
	// Backoff postpones transient retries by a growing, jittered
	// BackoffSchedule (optional: without it they come back after the
	// queue's visibility timeout).
	Backoff         Backoff
	BackoffSchedule BackoffSchedule
	// Random returns a value in [0, n): the back-off's jitter (rand.Int64N
	// if nil).
	Random func(n int64) int64
	// Ticks writes the job record of a recurring schedule's tick when a
	// worker first sees it (optional: without it a tick runs without a
	// record).
	Ticks TickJobs
	// ParkDelay is how long a disabled job waits before it is looked at again
	// (DefaultParkDelay if 0, capped at 900 s).
	ParkDelay time.Duration
	// MaxReceiveCount is the work queues' redrive maxReceiveCount: the
	// delivery with this receive count is the final attempt.
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
	Logger        *slog.Logger
	Metrics       *Metrics
	// TracerProvider, when set, makes a CONSUMER span per record
	// (spans.go); nil makes none and costs nothing. The engine uses the
	// OpenTelemetry API only: the SDK, its exporter and its flush are the
	// caller's.
	TracerProvider trace.TracerProvider
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// AtStep, when set, is called at each step boundary of the batch and
	// its records (Step): a test or a fault-injection build hooks in there
	// (the bundle's chaos build kills the process at one). Nil in
	// production.
	AtStep func(Step)
	// Go, when set, starts each record's work instead of the process's
	// kept workers (workers.go). Nil in production.
	Go func(f func())
}

// Step names a boundary of a batch's life where Config.AtStep is called.
type Step string

// The step boundaries, in the order a job meets them.
const (
	StepAfterDecode    Step = "after-decode"    // every record of the batch decoded, its switch read
	StepAfterLease     Step = "after-lease"     // a record's lease taken
	StepAfterEffect    Step = "after-effect"    // a record's handler returned
	StepAfterClaim     Step = "after-claim"     // a record's marker claimed
	StepBeforeResponse Step = "before-response" // the batch response built, not yet returned
)

// at calls the AtStep hook, if any.
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
	for name, h := range cfg.Handlers {
		t, err := cfg.Registry.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("runner: handler for %w", err)
		}
		if c, ok := h.(argsChecker); ok {
			if err := c.checkArgs(t); err != nil {
				return nil, fmt.Errorf("runner: handler for %s: %w", name, err)
			}
		}
	}
	if cfg.ParkDelay <= 0 || cfg.ParkDelay > DefaultParkDelay {
		cfg.ParkDelay = DefaultParkDelay
	}
	cfg.MaxReceiveCount = positiveOr(cfg.MaxReceiveCount, DefaultMaxReceiveCount)
	cfg.DeadlineMargin = positiveOr(cfg.DeadlineMargin, DefaultDeadlineMargin)
	cfg.WriteTimeout = positiveOr(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.ClaimAttempts = positiveOr(cfg.ClaimAttempts, DefaultClaimAttempts)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.BackoffSchedule = cfg.BackoffSchedule.withDefaults()
	if cfg.Random == nil {
		cfg.Random = rand.Int64N
	}
	r := &Runner{cfg: cfg}
	if cfg.TracerProvider != nil {
		r.tracer = cfg.TracerProvider.Tracer(tracerName)
		r.spanNames = map[Queue]string{}
		for _, name := range cfg.Registry.Names() {
			if t, err := cfg.Registry.Lookup(name); err == nil {
				r.spanNames[t.Queue] = string(t.Queue) + " process"
			}
		}
	}
	return r, nil
}

// positiveOr is v, or def when v is not positive (a Config field left
// zero, or set below zero).
func positiveOr[T ~int | ~int32 | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
