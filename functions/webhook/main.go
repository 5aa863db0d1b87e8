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

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/webhook"
	"github.com/runstwice/runstwice/internal/wiring/worker"
	"github.com/runstwice/runstwice/message"
)

// Consumes is the work queues this function is the worker of: its event
// sources in template.yaml (the main test checks both agree).
var Consumes = []message.Queue{contract.WebhookDeliver.Queue}

// deliveryTimeout bounds one POST, well inside the function's 30 s.
const deliveryTimeout = 10 * time.Second

// The functions' mains have one form on purpose: each function is its own
// binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("webhook", build, func(h *runner.Runner) any { return h.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*runner.Runner, error) {
	env := envvar.New(os.Getenv)
	w := worker.Read(env, Consumes...)
	target := env.Required("WEBHOOK_URL")
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	handlers, err := webhook.Handlers(webhook.Config{URL: target, Client: &http.Client{Timeout: deliveryTimeout}})
	if err != nil {
		return nil, err
	}
	return runner.New(w.Config(cfg, w.Parts(ctx, cfg), contract.Registry(), handlers, log))
}
