// Command enqueue is the Lambda function behind the HTTP API (the routes of
// enqueue.Routes: POST /v1/jobs/{type}, GET /v1/jobs, GET and DELETE
// /v1/jobs/{jobId}, POST /v1/batches, GET /v1/batches/{batchId}). It only
// wires adapters; the logic is internal/enqueue, a net/http handler that
// Handle serves to API Gateway's events (internal/apigw).
//
// Environment: IDEMPOTENCY_TABLE, JOBS_TABLE, MARKERS_TABLE,
// QUEUE_URL_CRITICAL, QUEUE_URL_DEFAULT, QUEUE_URL_BULK, and for jobs due
// later than 15 minutes SCHEDULE_GROUP, SCHEDULER_ROLE_ARN,
// QUEUE_ARN_CRITICAL, QUEUE_ARN_DEFAULT, QUEUE_ARN_BULK, DLQ_ARN;
// ALLOW_FEDERATED_USERS ("true" accepts STS federated users as callers;
// "false", the default, refuses them); STAGE, LOG_LEVEL (and the standard
// AWS variables, AWS_ENDPOINT_URL included).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/jobs/mine"
	"github.com/runstwice/runstwice/internal/wiring"
)

// The six functions' mains have one form on purpose: each function is
// its own binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("enqueue", build, func(h *enqueue.Handler) any { return h.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*enqueue.Handler, error) {
	env := envvar.New(os.Getenv)
	// A federated user names itself: refused unless the stack says
	// otherwise (template parameter AllowFederatedUsers).
	allowFederated := env.Bool("ALLOW_FEDERATED_USERS", false)
	e, err := wiring.Enqueue(ctx, env, log)
	if err != nil {
		return nil, err
	}
	e.Handler.AllowFederatedUsers = allowFederated
	// GET /v1/jobs: the caller's jobs from the jobs table's byCaller index.
	e.Handler.List = mine.NewLister(e.DB, e.JobsTable, e.Markers)
	return e.Handler, nil
}
