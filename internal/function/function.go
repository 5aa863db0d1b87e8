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
)

// Main builds the function's handler with build and starts it with
// lambda.Start(handler(h)). A function that cannot start (a missing
// variable, a bad value) logs every problem on one line and exits 1, so the
// Lambda service reports an init error instead of running half-configured.
func Main[H any](name string, build func(ctx context.Context, log *slog.Logger) (H, error), handler func(H) any) {
	log := obs.DefaultLogger()
	h, err := build(context.Background(), log)
	if err != nil {
		log.Error(name+" function cannot start", obs.KeyError, err.Error())
		os.Exit(1)
	}
	lambda.Start(handler(h))
}
