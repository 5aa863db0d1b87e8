// Package wiring builds, from a function's environment, what more than one
// of the bundle's Lambda functions runs: today the API's enqueue path,
// which the enqueue function serves over HTTP and the outbox relay runs for
// every item. A function's main reads its own variables, calls a builder
// here, and hands the result to internal/function.
package wiring

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/tracing"
)

// Enqueue builds the API's enqueue path from env: the request layer
// (IDEMPOTENCY_TABLE), the job records with their markers and one-time
// schedules (JOBS_TABLE, MARKERS_TABLE, the scheduler's variables) and the
// work queues (QUEUE_URL_*). It reads every variable it needs before it
// asks env for the AWS configuration, so the caller reads its own first
// and every problem is named at once.
func Enqueue(ctx context.Context, env *envvar.Env, log *slog.Logger) (Enqueuing, error) {
	env.Required("STAGE")
	idemTable := env.Required("IDEMPOTENCY_TABLE")
	jobsTable := env.Required("JOBS_TABLE")
	markersTable := env.Required("MARKERS_TABLE")
	urls := env.QueueURLs()
	sched := schedule.ConfigFrom(env)
	cfg, err := env.Config(ctx)
	if err != nil {
		return Enqueuing{}, err
	}
	db := dynamodb.NewFromConfig(cfg)
	schedules := schedule.New(scheduler.NewFromConfig(cfg), sched)
	markers := marker.NewStore(db, markersTable)
	store := jobs.NewStore(db, jobsTable, markers)
	store.Schedules = schedules
	h := &enqueue.Handler{
		Registry:    contract.Registry(),
		Idempotency: idempotency.NewStore(db, idemTable),
		Jobs:        store,
		Batches:     store,
		Queue:       sqsqueue.New(sqs.NewFromConfig(cfg), urls, ""),
		Schedules:   schedules,
		Logger:      log,
		// The tracer provider function.Main put in ctx (nil: no spans).
		TracerProvider: tracing.FromContext(ctx),
		Metrics:        engine.DefaultMetrics(obs.Namespace),
	}
	return Enqueuing{Handler: h, DB: db, JobsTable: jobsTable, Markers: markers, Store: store, Config: cfg}, nil
}

// Enqueuing is the enqueue path Enqueue built, with the parts a caller
// may build more on: the DynamoDB client, the jobs table's name and the
// markers store the job records are derived with.
type Enqueuing struct {
	Handler   *enqueue.Handler
	DB        *dynamodb.Client
	JobsTable string
	Markers   *dynamostore.Store
	// Store is the jobs store the handler reserves with; Config the AWS
	// configuration everything was built on.
	Store  *jobs.Store
	Config aws.Config
}
