// Command outbox is the outbox relay: it consumes the outbox table's stream
// and enqueues each item as the API would.
//
// PLACEHOLDER (issue 23): this wires the adapters the relay uses, so that
// sam build, the template tests and the local stack have a function to
// build; it relays nothing and fails every invocation. The relay replaces
// it.
//
// Environment: JOBS_TABLE, MARKERS_TABLE, DEAD_LETTERS_TABLE,
// QUEUE_URL_CRITICAL, QUEUE_URL_DEFAULT, QUEUE_URL_BULK, STAGE, LOG_LEVEL.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/queue"
)

func main() {
	function.Main("outbox", build, func(r *relay) any { return r.handle })
}

type relay struct {
	jobs        *jobs.Store
	queue       *queue.Sender
	deadLetters *deadletter.Store
}

func build(ctx context.Context, _ *slog.Logger) (*relay, error) {
	env := envvar.New(os.Getenv)
	env.Required("STAGE")
	jobsTable := env.Required("JOBS_TABLE")
	markersTable := env.Required("MARKERS_TABLE")
	deadLetters := env.Required("DEAD_LETTERS_TABLE")
	urls := env.QueueURLs()
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	return &relay{
		jobs:        jobs.NewStore(db, jobsTable, marker.NewDynamo(db, markersTable)),
		queue:       queue.New(sqs.NewFromConfig(cfg), urls, ""),
		deadLetters: deadletter.NewStore(db, deadLetters),
	}, nil
}

func (r *relay) handle(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return events.DynamoDBEventResponse{}, errors.New("outbox: the relay is a placeholder")
}
