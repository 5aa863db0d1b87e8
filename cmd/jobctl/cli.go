package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/catalog"
	"github.com/runstwice/runstwice/internal/contract"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
	exitRefused  = 4 // understood and refused: the API rejected the job (duplicate policy, unknown type)
)

const usage = `usage: jobctl [--stage STAGE] [--json] COMMAND

commands:
  toggles list                  every job type: stored value, default, effective state; typos flagged
  toggles set TYPE on|off       flip a kill switch (takes effect within the toggle TTL, no deploy)
  dlq list                      dead letters: type, messageId, reason, attempts, when
  dlq redrive ID|--all          send dead letters back to their queue under the same messageId
  jobs get ID                   a job record
  ` + enqueueUsage + `

--stage defaults to $STAGE, else "local". AWS_ENDPOINT_URL is honoured.
`

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// notFoundError: exit code 3.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// refusedError: exit code 4.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// app is one jobctl invocation.
type app struct {
	stdout, stderr io.Writer
	json           bool
	stage          string
	getenv         func(string) string
	reg            *contract.Registry
	cfg            aws.Config
	res            resources
}

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, reg: catalog.Registry(), stage: getenv("STAGE")}
	rest, err := a.parseFlags(args)
	if err == nil && len(rest) == 0 {
		err = usagef("no command given")
	}
	if err == nil {
		if a.cfg, err = awsx.Load(ctx); err == nil {
			a.res = resolveResources(a.stage, getenv)
			err = a.dispatch(ctx, rest)
		}
	}
	var ue *usageError
	var nf *notFoundError
	var rf *refusedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "jobctl: %s\n\n%s", ue.msg, usage)
		return exitUsage
	case errors.As(err, &nf):
		fmt.Fprintf(stderr, "jobctl: %s\n", nf.msg)
		return exitNotFound
	case errors.As(err, &rf):
		fmt.Fprintf(stderr, "jobctl: refused: %s\n", rf.msg)
		return exitRefused
	}
	fmt.Fprintf(stderr, "jobctl: %v\n", err)
	return exitError
}

// parseFlags takes --stage and --json from anywhere in args (so
// `jobctl toggles list --json` works) and returns the rest.
func (a *app) parseFlags(args []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--json" || arg == "-json":
			a.json = true
		case arg == "--stage" || arg == "-stage":
			if i+1 >= len(args) {
				return nil, usagef("--stage needs a value")
			}
			i++
			a.stage = args[i]
		case strings.HasPrefix(arg, "--stage="):
			a.stage = strings.TrimPrefix(arg, "--stage=")
		case arg == "-h" || arg == "--help" || arg == "help":
			return nil, usagef("help")
		default:
			rest = append(rest, arg)
		}
	}
	if a.stage == "" {
		a.stage = "local"
	}
	if !validStage(a.stage) {
		return nil, usagef("invalid stage %q (letters, digits and '-')", a.stage)
	}
	return rest, nil
}

func validStage(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return s != "" && len(s) <= 32
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	if args[0] == "enqueue" {
		return a.enqueue(ctx, args[1:])
	}
	cmd := strings.Join(args[:min(2, len(args))], " ")
	rest := args[min(2, len(args)):]
	switch cmd {
	case "toggles list":
		return a.togglesList(ctx, rest)
	case "toggles set":
		return a.togglesSet(ctx, rest)
	case "dlq list":
		return a.dlqList(ctx, rest)
	case "dlq redrive":
		return a.dlqRedrive(ctx, rest)
	case "jobs get":
		return a.jobsGet(ctx, rest)
	}
	return usagef("unknown command %q", strings.Join(args, " "))
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func noArgs(cmd string, rest []string) error {
	if len(rest) != 0 {
		return usagef("%s takes no arguments, got %q", cmd, strings.Join(rest, " "))
	}
	return nil
}
