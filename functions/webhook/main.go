// Command webhook is the webhook worker Lambda function: it consumes the
// webhooks queue (ReportBatchItemFailures) and runs webhook.deliver.v1
// through the runner, POSTing each event to WEBHOOK_URL with the job id as
// its Idempotency-Key. It only wires adapters.
package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/webhook"
)

// Consumes is the work queues this function is the worker of: its event
// sources in template.yaml (the main test checks both agree).
var Consumes = []engine.Queue{contract.WebhookDeliver.Queue}

// deliveryTimeout bounds one POST, well inside the function's 30 s.
const deliveryTimeout = 10 * time.Second

// The functions' mains have one form on purpose: each function is its own
// binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("webhook", build, func(h *engine.Runner) any { return h.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*engine.Runner, error) {
	env := envvar.New(os.Getenv)
	stage := env.Required("STAGE")
	markersTable := env.Required("MARKERS_TABLE")
	jobsTable := env.Required("JOBS_TABLE")
	urls := env.QueueURLsOf(Consumes...)
	dlqURL := env.Required("DLQ_URL")
	target := env.Required("WEBHOOK_URL")
	toggleTTL := env.Duration("TOGGLE_TTL", ssmswitch.DefaultTTL)
	parkDelay := env.Seconds("PARK_DELAY", engine.DefaultParkDelay)
	maxReceives := env.Int("MAX_RECEIVE_COUNT", engine.DefaultMaxReceiveCount)
	concurrency := env.Int("BATCH_CONCURRENCY", 10)
	backoff := engine.BackoffSchedule{
		Base:   env.Duration("BACKOFF_BASE", engine.DefaultBackoffBase),
		Factor: float64(env.Int("BACKOFF_FACTOR", int(engine.DefaultBackoffFactor))),
		Cap:    env.Duration("BACKOFF_CAP", engine.DefaultBackoffCap),
	}
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	handlers, err := webhook.Handlers(webhook.Config{URL: target, Client: &http.Client{Timeout: deliveryTimeout}})
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	metrics := engine.DefaultMetrics(obs.Namespace)
	reg := contract.Registry()
	toggles := ssmswitch.New(ssm.NewFromConfig(cfg), contract.SwitchPath(stage), func(n string) bool { _, err := reg.Lookup(n); return err == nil })
	toggles.TTL, toggles.Logger, toggles.Metrics = toggleTTL, log, metrics
	sqsClient := sqs.NewFromConfig(cfg)
	queues := sqsqueue.New(sqsClient, urls, dlqURL)
	runcfg := engine.Config{
		Registry: reg, Handlers: handlers, Switch: toggles, Markers: dynamostore.New(db, markersTable),
		Parker: queues, DeadLetterer: queues, Jobs: jobs.ForEngine(jobs.NewRecorder(db, jobsTable)),
		Backoff: sqsqueue.NewVisibility(sqsClient, urls), BackoffSchedule: backoff,
		ParkDelay: min(parkDelay, engine.DefaultParkDelay), MaxReceiveCount: maxReceives, Concurrency: concurrency,
		Logger: log, Metrics: metrics,
	}
	killpoint.Wire(&runcfg) // the chaos build's kill points and mutations; nothing in a release build
	return engine.New(runcfg)
}
