// Command dlq is the dead-letter Lambda function: it consumes the DLQ
// (ReportBatchItemFailures), stores every dead letter once, marks its job
// Failed, emits the DeadLetters metric and logs one alert line. It only wires
// adapters.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/tracing"
)

func main() {
	function.Main("dlq", build, func(h *deadletter.Consumer) any { return h.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*deadletter.Consumer, error) {
	env := envvar.New(os.Getenv)
	env.Required("STAGE")
	deadLetters := env.Required("DEAD_LETTERS_TABLE")
	jobsTable := env.Required("JOBS_TABLE")
	markersTable := env.Required("MARKERS_TABLE")
	// The queue URLs are part of the function's contract (redrive targets);
	// checked here so a misconfigured stack fails at start.
	env.QueueURLs()
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	markers := marker.NewStore(db, markersTable)
	return deadletter.NewConsumer(deadletter.Config{
		Records: deadletter.NewStore(db, deadLetters), Markers: markers,
		Jobs:     jobs.NewRecorder(db, jobsTable),
		Registry: contract.Registry(), Logger: log, Metrics: engine.DefaultMetrics(obs.Namespace),
		TracerProvider: tracing.FromContext(ctx),
	})
}
