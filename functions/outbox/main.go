// Command outbox is the outbox relay Lambda function: it consumes the outbox
// table's stream (ReportBatchItemFailures, bisect on error, bounded retries,
// an on-failure destination) and enqueues each item exactly as the API
// would, for caller outbox:<producer> with the item's Idempotency-Key. An
// item that breaks a rule becomes a dead letter with its reason. It only
// wires adapters.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/internal/schedule"
)

// The functions' mains have one form on purpose: each function is its own
// binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("outbox", build, func(r *outbox.Relay) any { return r.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*outbox.Relay, error) {
	env := envvar.New(os.Getenv)
	env.Required("STAGE")
	idemTable := env.Required("IDEMPOTENCY_TABLE")
	jobsTable := env.Required("JOBS_TABLE")
	markersTable := env.Required("MARKERS_TABLE")
	deadLetters := env.Required("DEAD_LETTERS_TABLE")
	urls := env.QueueURLs()
	sched := schedule.ConfigFrom(env)
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	schedules := schedule.New(scheduler.NewFromConfig(cfg), sched)
	store := jobs.NewStore(db, jobsTable, dynamostore.New(db, markersTable))
	store.Schedules = schedules
	// The API's own enqueue path under its request layer: what the relay
	// decided for an item is stored under the item's key (EnqueueFor).
	metrics := engine.DefaultMetrics(obs.Namespace)
	api := &enqueue.Handler{
		Registry: contract.Registry(), Idempotency: idempotency.NewStore(db, idemTable), Jobs: store,
		Queue: sqsqueue.New(sqs.NewFromConfig(cfg), urls, ""), Schedules: schedules, Logger: log, Metrics: metrics,
	}
	return &outbox.Relay{Enqueuer: api, DeadLetters: deadletter.NewStore(db, deadLetters), Logger: log, Metrics: metrics}, nil
}
