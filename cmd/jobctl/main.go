// Command jobctl is the on-call tool for runstwice: flip kill switches (also
// for a while, with a reason), triage, redrive and drop dead letters, list,
// read and cancel jobs, list the schedules and send a recurring schedule's
// tick by hand, mend a user's stored address, enqueue a job or a batch.
//
//	jobctl [--stage S] [--endpoint URL] [--json] COMMAND
//	  toggles list
//	  toggles set TYPE on|off [--for DURATION] [--reason TEXT]
//	  dlq list [--type T] [--since D] [--reason TEXT] [--status S]
//	  dlq redrive ID|--all [--type T] [--since D] [--reason TEXT] [--rate N/s] [--dry-run] [--force]
//	  dlq drop ID|--all [--type T] [--since D] [--reason TEXT] [--dry-run] --yes
//	  jobs get ID
//	  jobs list [--type T] [--state S] [--since D]
//	  jobs cancel ID
//	  schedules list
//	  schedules trigger NAME [--at TIME]
//	  users set-email USER_ID ADDRESS
//	  enqueue TYPE key=value… [--key K] [--policy P] [--delay S | --run-at TIME | --after JOB_ID [--after-policy P]] [--idempotency-key K] [--api URL] [--caller NAME]
//	  enqueue --batch FILE [--idempotency-key K] [--api URL] [--caller NAME]
//	  batches get BATCH_ID [--api URL] [--caller NAME]
//
// `jobctl --help` (or `help`, or COMMAND --help) prints help on stdout.
//
// It uses the standard AWS configuration chain and honours AWS_ENDPOINT_URL,
// with the EC2 metadata service off unless AWS_EC2_METADATA_DISABLED=false
// (elsewhere it would hang). For stage local with no endpoint given it uses
// the running local stack named by .devstack/stack.json (in the working
// directory or above). Table names and queue URLs come from the same
// environment variables the functions use (JOBS_TABLE, DEAD_LETTERS_TABLE,
// MARKERS_TABLE, USERS_TABLE, QUEUE_URL_CRITICAL, …), else from .devstack/resources.json
// (the local stack), else from the stack's naming convention for the stage.
//
// Exit codes: 0 success; 1 an AWS or runtime error (no credentials, no
// endpoint, a failed call); 2 a usage error; 3 not found (a job, a dead
// letter, a user); 4 refused (a type
// not in the registry, a superseded letter without --force, a drop without
// --yes, a letter that cannot be redriven).
package main

import (
	"context"
	"os"

	"github.com/runstwice/runstwice/internal/cmdmain"
)

func main() {
	cmdmain.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv) })
}
