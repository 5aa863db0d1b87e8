// Command chain is the chain function: what follows a job's end and a
// batch's accept. It consumes the markers table's stream (a settled marker
// releases or cancels the jobs that wait for that job) and the chain queue,
// whose jobs it runs through the runner: a batch's finisher and the
// continuation sweep's tick. It only wires adapters.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/runstwice/runstwice/internal/chain"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/sweepindex"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/wiring"
	"github.com/runstwice/runstwice/internal/wiring/worker"
	"github.com/runstwice/runstwice/message"
)

// Consumes is the work queues this function is the worker of: its event
// sources in template.yaml (the main test checks both agree).
var Consumes = []message.Queue{contract.QueueChain}

// The functions' mains have one form on purpose: each function is its own
// binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("chain", build, func(f *chain.Function) any { return f })
}

func build(ctx context.Context, log *slog.Logger) (*chain.Function, error) {
	env := envvar.New(os.Getenv)
	w := worker.Read(env, Consumes...)
	// The enqueue path releases continuations and finishes batches exactly
	// as the API enqueues: the same reservation, send and scheduling.
	e, err := wiring.Enqueue(ctx, env, log)
	if err != nil {
		return nil, err
	}
	send := e.Handler.SendFunc()
	// The continuation sweep pages the parents listed in the index sweep.
	e.Store.Index = sweepindex.New(e.DB, e.JobsTable)
	handlers, err := chain.Handlers(e.Handler, e.Store, send)
	if err != nil {
		return nil, err
	}
	p := w.Parts(ctx, e.Config)
	runcfg := w.Config(e.Config, p, contract.Registry(), handlers, log)
	runcfg.Ticks = jobs.TicksForEngine(e.Store)
	runner, err := runner.New(runcfg)
	if err != nil {
		return nil, err
	}
	return &chain.Function{Runner: runner, Stream: &chain.Stream{Releaser: e.Store, Send: send, Logger: log}}, nil
}
