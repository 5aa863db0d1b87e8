// Command jobctl is the on-call tool for runstwice: flip kill switches, read
// and redrive dead letters, look up a job.
//
//	jobctl [--stage S] [--json] toggles list
//	jobctl [--stage S] [--json] toggles set TYPE on|off
//	jobctl [--stage S] [--json] dlq list
//	jobctl [--stage S] [--json] dlq redrive ID|--all
//	jobctl [--stage S] [--json] jobs get ID
//
// It uses the standard AWS configuration chain and honours AWS_ENDPOINT_URL.
// Table names and queue URLs come from the same environment variables the
// functions use (JOBS_TABLE, DEAD_LETTERS_TABLE, MARKERS_TABLE,
// QUEUE_URL_CRITICAL, …), else from .devstack/resources.json when it exists
// (the local stack), else from the stack's naming convention for the stage.
//
// Exit codes: 0 success, 1 an AWS or runtime error, 2 a usage error (unknown
// command or job type, bad value), 3 not found.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
