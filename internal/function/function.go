// Package function is how every Lambda function of runstwice starts: its
// main builds the handler from the environment (wiring adapters only) and
// hands it to Main, which logs why a function cannot start and exits, or
// starts the Lambda runtime loop.
package function

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/tracing"
)

// Main builds the function's handler with build and starts it with
// lambda.Start(handler(h)). A function that cannot start (a missing
// variable, a bad value) logs every problem on one line and exits 1, so the
// Lambda service reports an init error instead of running half-configured.
//
// When the environment names an OTLP endpoint (internal/tracing), build's
// context carries the function's tracer provider (tracing.FromContext) and
// every invocation's spans are flushed before it returns.
func Main[H any](name string, build func(ctx context.Context, log *slog.Logger) (H, error), handler func(H) any) {
	log := obs.DefaultLogger()
	ctx := context.Background()
	tp, err := tracing.NewProvider(ctx, name, os.Getenv)
	if err != nil {
		log.Error(name+" function cannot start", obs.KeyError, err.Error())
		os.Exit(1)
	}
	h, err := build(tracing.WithProvider(ctx, tp), log)
	if err != nil {
		log.Error(name+" function cannot start", obs.KeyError, err.Error())
		os.Exit(1)
	}
	if tp == nil {
		lambda.Start(handler(h))
		return
	}
	lambda.Start(tracing.Flushing(lambda.NewHandler(handler(h)), tp))
}
