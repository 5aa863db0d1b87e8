// Package cmdmain is what every command's main shares: an interrupt or a
// SIGTERM cancels the run's context, the run's exit code ends the process,
// and an error is said once, under the command's name. How an error maps
// to an exit code stays each command's own (Exit's code).
package cmdmain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main runs run with a context that an interrupt or a SIGTERM cancels, and
// exits with the code it returns.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// Exit is the exit code of a run that ended with err: 0 for nil and for
// flag.ErrHelp (the flag set has printed its help), else code(err) (1 when
// code is nil), once "name: err" is written to stderr.
func Exit(stderr io.Writer, name string, err error, code func(error) int) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if code == nil {
		return 1
	}
	return code(err)
}
