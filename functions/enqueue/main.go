// Command enqueue is the Lambda function behind the HTTP API: POST
// /v1/jobs/{type} and GET /v1/jobs/{jobId}. It only wires adapters; the logic
// is internal/enqueue.
//
// Environment: IDEMPOTENCY_TABLE, JOBS_TABLE, MARKERS_TABLE,
// QUEUE_URL_CRITICAL, QUEUE_URL_DEFAULT, QUEUE_URL_BULK, STAGE, LOG_LEVEL
// (and the standard AWS variables, AWS_ENDPOINT_URL included).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/catalog"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
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
		log.Error("enqueue: start", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*enqueue.Handler, error) {
	env := map[string]string{}
	for _, name := range []string{"IDEMPOTENCY_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "QUEUE_URL_CRITICAL", "QUEUE_URL_DEFAULT", "QUEUE_URL_BULK"} {
		v := os.Getenv(name)
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is not set", name)
		}
		env[name] = v
	}
	cfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	log = log.With("stage", awsx.Getenv("STAGE", "dev"))
	return &enqueue.Handler{
		Registry: catalog.Registry(),
		Requests: idempotency.NewStore(db, env["IDEMPOTENCY_TABLE"]),
		Jobs:     jobs.NewStore(db, env["JOBS_TABLE"], marker.NewDynamo(db, env["MARKERS_TABLE"])),
		Queue: queue.New(sqs.NewFromConfig(cfg), map[contract.Queue]string{
			contract.QueueCritical: env["QUEUE_URL_CRITICAL"],
			contract.QueueDefault:  env["QUEUE_URL_DEFAULT"],
			contract.QueueBulk:     env["QUEUE_URL_BULK"],
		}, ""),
		Logger: log,
	}, nil
}
