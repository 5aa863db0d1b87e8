// Command enqueue is the Lambda function behind the HTTP API: POST
// /v1/jobs/{type}, GET /v1/jobs/{jobId} and DELETE /v1/jobs/{jobId}. It only
// wires adapters; the logic is internal/enqueue.
//
// Environment: IDEMPOTENCY_TABLE, JOBS_TABLE, MARKERS_TABLE,
// QUEUE_URL_CRITICAL, QUEUE_URL_DEFAULT, QUEUE_URL_BULK, STAGE, LOG_LEVEL
// (and the standard AWS variables, AWS_ENDPOINT_URL included).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/catalog"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/queue"
)

func main() {
	log := obs.DefaultLogger()
	h, err := build(context.Background(), log)
	if err != nil {
		log.Error("enqueue function cannot start", obs.KeyError, err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*enqueue.Handler, error) {
	env := envvar.New(os.Getenv)
	env.Required("STAGE")
	idemTable := env.Required("IDEMPOTENCY_TABLE")
	jobsTable := env.Required("JOBS_TABLE")
	markersTable := env.Required("MARKERS_TABLE")
	urls := env.QueueURLs()
	if err := env.Err(); err != nil {
		return nil, err
	}
	cfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	return &enqueue.Handler{
		Registry:    catalog.Registry(),
		Idempotency: idempotency.NewStore(db, idemTable),
		Jobs:        jobs.NewStore(db, jobsTable, marker.NewDynamo(db, markersTable)),
		Queue:       queue.New(sqs.NewFromConfig(cfg), urls, ""),
		Logger:      log,
	}, nil
}
