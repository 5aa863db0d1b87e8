package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

// Exit codes (also in usage and the package comment).
const (
	exitOK       = 0
	exitError    = 1 // an AWS or runtime error: no credentials, no endpoint, a failed call
	exitUsage    = 2 // the command line is wrong
	exitNotFound = 3 // the job, dead letter or user does not exist
	exitRefused  = 4 // understood and refused: a type not in the registry, a superseded letter not forced, a drop without --yes
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct {
	msg string
	cmd *command // the command it is about, nil for the command line as a whole
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// notFoundError: exit code 3.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// refusedError: exit code 4.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refusedf(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// app is one jobctl invocation.
type app struct {
	stdout, stderr io.Writer
	// stdin is what `enqueue --batch -` reads (os.Stdin when nil).
	stdin io.Reader
	// stderrTTY reports that stderr is a terminal (progress lines redraw).
	stderrTTY bool
	json      bool
	stage     string
	// stageGiven: --stage, RUNSTWICE_STAGE or STAGE named the stage.
	stageGiven bool
	endpoint   string // --endpoint
	getenv     func(string) string
	now        func() time.Time
	clk        clock // pacing and progress (realClock when nil)
	// stateDir is where the local stack's files are looked for ("" = search
	// from the working directory up).
	stateDir string
	// toggleTTL is the running local stack's ToggleTtl ("" when unknown).
	toggleTTL string
	reg       *message.Registry
	cfg       aws.Config
	res       resources
}

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, reg: contract.Registry(), now: time.Now}
	if f, ok := stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil {
			a.stderrTTY = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return a.main(ctx, args)
}

func (a *app) clock() clock {
	if a.clk == nil {
		return realClock{}
	}
	return a.clk
}

func (a *app) main(ctx context.Context, args []string) int {
	rest, help, err := a.parseGlobal(args)
	var cmd *command
	if err == nil {
		cmd, rest, err = find(rest, help)
	}
	switch {
	case err != nil:
	case help:
		a.printHelp(cmd)
		return exitOK
	default:
		err = cmd.run(a, ctx, rest)
		var ue *usageError
		if errors.As(err, &ue) && ue.cmd == nil {
			ue.cmd = cmd
		}
	}
	return a.exit(err)
}

// exit prints err (one line for a usage error, with the usage of its
// command) and returns its exit code.
func (a *app) exit(err error) int {
	var (
		ue *usageError
		nf *notFoundError
		rf *refusedError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		hint := "usage: " + globalUsage + " …; jobctl --help lists the commands"
		if ue.cmd != nil {
			hint = fmt.Sprintf("usage: jobctl %s; jobctl %s --help for more", ue.cmd.usage, ue.cmd.name)
		}
		fmt.Fprintf(a.stderr, "jobctl: %s (%s)\n", ue.msg, hint)
		return exitUsage
	case errors.As(err, &nf):
		fmt.Fprintf(a.stderr, "jobctl: %s\n", nf.msg)
		return exitNotFound
	case errors.As(err, &rf):
		fmt.Fprintf(a.stderr, "jobctl: refused: %s\n", rf.msg)
		return exitRefused
	}
	fmt.Fprintf(a.stderr, "jobctl: %v\n", err)
	return exitError
}

// parseGlobal takes the global flags (--stage, --endpoint, --json, --help)
// from anywhere in args, so `jobctl toggles list --json` works, and returns
// the rest. help is set by --help, -h, or a leading "help".
func (a *app) parseGlobal(args []string) (rest []string, help bool, err error) {
	for _, env := range []string{"RUNSTWICE_STAGE", "STAGE"} {
		if v := a.getenv(env); v != "" && a.stage == "" {
			a.stage, a.stageGiven = v, true
		}
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			if i == 0 && arg == "help" {
				help = true
				continue
			}
			rest = append(rest, arg)
			continue
		}
		switch name {
		case "json":
			a.json = true
		case "h", "help":
			help = true
		case "stage", "endpoint":
			if !hasValue {
				if i+1 >= len(args) {
					return nil, false, usagef("--%s needs a value", name)
				}
				i++
				value = args[i]
			}
			if name == "stage" {
				a.stage, a.stageGiven = value, true
			} else {
				a.endpoint = value
			}
		default:
			rest = append(rest, arg) // a command's own flag
		}
	}
	if a.stage == "" {
		a.stage = "local"
	}
	if !validStage(a.stage) {
		return nil, false, usagef("invalid stage %q (letters, digits and '-')", a.stage)
	}
	return rest, help, nil
}

func validStage(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return s != "" && len(s) <= 32
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// warnf writes one warning line to stderr.
func (a *app) warnf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "jobctl: warning: "+format+"\n", args...)
}
