// Package worker builds what every worker function of the bundle runs
// alike (the e-mail and webhook functions): its environment's common
// variables, the kill switch, the markers, the queues it consumes and
// parks to, the back-off, the job records, and the runner's settings. A
// worker's main reads its own variables beside these, builds its
// handlers, and calls Env.Config for the runner's configuration.
package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/tracing"
	"github.com/runstwice/runstwice/internal/vclock"
	"github.com/runstwice/runstwice/message"
)

// Env is a worker's common environment: STAGE, MARKERS_TABLE, JOBS_TABLE,
// the URLs of the queues it consumes (QUEUE_URL_*), DLQ_URL, TOGGLE_TTL,
// PARK_DELAY, MAX_RECEIVE_COUNT, BATCH_CONCURRENCY and BACKOFF_*.
type Env struct {
	Stage, MarkersTable, JobsTable, DLQURL string
	URLs                                   map[string]string
	ToggleTTL, ParkDelay                   time.Duration
	MaxReceives, Concurrency               int
	Backoff                                engine.BackoffSchedule
}

// Read reads the common variables of a worker consuming queues. Call it
// before env.Config, so every problem is named at once.
func Read(env *envvar.Env, queues ...message.Queue) Env {
	return Env{
		Stage: env.Required("STAGE"), MarkersTable: env.Required("MARKERS_TABLE"), JobsTable: env.Required("JOBS_TABLE"),
		URLs: env.QueueURLsOf(queues...), DLQURL: env.Required("DLQ_URL"),
		ToggleTTL:   env.Duration("TOGGLE_TTL", ssmswitch.DefaultTTL),
		ParkDelay:   env.Seconds("PARK_DELAY", engine.DefaultParkDelay),
		MaxReceives: env.Int("MAX_RECEIVE_COUNT", engine.DefaultMaxReceiveCount),
		Concurrency: env.Int("BATCH_CONCURRENCY", 10),
		Backoff: engine.BackoffSchedule{
			Base:   env.Duration("BACKOFF_BASE", engine.DefaultBackoffBase),
			Factor: float64(env.Int("BACKOFF_FACTOR", int(engine.DefaultBackoffFactor))),
			Cap:    env.Duration("BACKOFF_CAP", engine.DefaultBackoffCap),
		},
	}
}

// Parts are what a worker's handlers may share with its runner: the
// DynamoDB client, the markers, the sender to its queues and the metrics.
type Parts struct {
	DB      *dynamodb.Client
	Markers *dynamostore.Store
	Queues  *sqsqueue.Sender
	Metrics *engine.Metrics
	// Tracer is the function's tracer provider (nil: no spans).
	Tracer trace.TracerProvider
}

// Parts builds the shared parts on cfg, with the tracer provider function.Main
// put in ctx.
func (e Env) Parts(ctx context.Context, cfg aws.Config) Parts {
	db := dynamodb.NewFromConfig(cfg)
	return Parts{
		DB: db, Markers: marker.NewStore(db, e.MarkersTable),
		Queues: sqsqueue.New(sqs.NewFromConfig(cfg), e.URLs, e.DLQURL), Metrics: engine.DefaultMetrics(obs.Namespace),
		Tracer: tracing.FromContext(ctx),
	}
}

// Config is the runner's configuration of a worker with reg and handlers:
// the stage's kill switches in SSM, the markers, parking and dead letters
// through its queues, the back-off on them, its job records, the chaos
// build's kill points (none in a release build), and a span per SQS record
// when the function traces.
func (e Env) Config(cfg aws.Config, p Parts, reg *message.Registry, handlers map[string]runner.Handler, log *slog.Logger) runner.Config {
	switches := ssmswitch.New(ssm.NewFromConfig(cfg), contract.SwitchPath(e.Stage), func(n string) bool { _, err := reg.Lookup(n); return err == nil })
	switches.TTL, switches.Logger, switches.Metrics = e.ToggleTTL, log, p.Metrics
	runcfg := runner.Config{
		Registry: reg, Handlers: handlers, Switch: switches, Markers: p.Markers,
		Parker: p.Queues, DeadLetterer: p.Queues, Jobs: jobs.ForEngine(jobs.NewRecorder(p.DB, e.JobsTable)),
		Backoff: sqsqueue.NewVisibility(sqs.NewFromConfig(cfg), e.URLs), BackoffSchedule: e.Backoff,
		ParkDelay: min(e.ParkDelay, engine.DefaultParkDelay), MaxReceiveCount: e.MaxReceives, Concurrency: e.Concurrency,
		Logger: log, Metrics: p.Metrics, TracerProvider: p.Tracer,
		// The markers' expiry is counted on the bundle's clock, as the store
		// reads them (the chaos build's virtual clock jumps days).
		Now: vclock.Now,
	}
	killpoint.Wire(&runcfg)
	return runcfg
}
