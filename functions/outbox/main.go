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

	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/internal/wiring"
)

// The functions' mains have one form on purpose: each function is its own
// binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("outbox", build, func(r *outbox.Relay) any { return r.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*outbox.Relay, error) {
	env := envvar.New(os.Getenv)
	deadLetters := env.Required("DEAD_LETTERS_TABLE")
	// The API's own enqueue path under its request layer: what the relay
	// decided for an item is stored under the item's key (EnqueueFor).
	e, err := wiring.Enqueue(ctx, env, log)
	if err != nil {
		return nil, err
	}
	return &outbox.Relay{Enqueuer: e.Handler, DeadLetters: deadletter.NewStore(e.DB, deadLetters), Logger: log, Metrics: e.Handler.Metrics,
		TracerProvider: e.Handler.TracerProvider}, nil
}
