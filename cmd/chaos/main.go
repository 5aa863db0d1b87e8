// Command chaos runs the chaos campaign (make chaos): the whole local stack
// under AWS faults, process kills at every step boundary, duplicate and
// concurrent deliveries, switch flips, an SSM outage, cancels and redrives,
// jobs through the outbox and ticks of the weekly digest fan-out, then the
// ledger from ground truth. It prints the ledger as a table,
// writes it as JSON, and exits 1 when an invariant breaks (naming the job
// ids), 2 on a bad command line.
//
//	chaos [-n 300] [-seed 1] [-faults SPEC|none] [-kill-at SPEC|none] [-mutate NAME,…]
//	      [-concurrency 16] [-ses-outage 60s] [-weekly-partners 105] [-timeout 30m] [-ledger .devstack/chaos-ledger.json]
//	      [-state-dir .devstack/chaos]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/runstwice/runstwice/internal/cmdmain"
	"github.com/runstwice/runstwice/internal/dev/chaos"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/killpoint"
)

func main() {
	cmdmain.Main(func(ctx context.Context) int {
		code, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		cmdmain.Exit(os.Stderr, "chaos", err, nil) // says the error; the code is run's
		return code
	})
}

// run runs the command and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stdout)
	n := fs.Int("n", chaos.DefaultN, "how many jobs to enqueue")
	seed := fs.Uint64("seed", 1, "seed of the plan and the faults")
	faultSpec := fs.String("faults", chaos.DefaultFaults, "the AWS faults (see internal/dev/faults), or none")
	killAt := fs.String("kill-at", chaos.DefaultKillAt, "RUNSTWICE_KILL_AT: step=probability,…, or none")
	mutate := fs.String("mutate", "", "break the runner on purpose: "+strings.Join(killpoint.Mutations, ", "))
	concurrency := fs.Int("concurrency", 16, "how many enqueues run at once")
	sesOutage := fs.Duration("ses-outage", chaos.DefaultSESOutage, "how long SES is down mid-run (long enough to send jobs to the DLQ)")
	weekly := fs.Int("weekly-partners", chaos.DefaultWeeklyPartners, "how many users of the weekly digest to seed (over 99 makes the fan-out read two pages)")
	timeout := fs.Duration("timeout", chaos.DefaultTimeout, "the most the campaign may take")
	noClock := fs.Bool("no-clock", false, "leave out the clock campaign (the virtual clock's jumps after the load)")
	ledger := fs.String("ledger", ".devstack/chaos-ledger.json", "where the ledger's JSON goes")
	stateDir := fs.String("state-dir", ".devstack/chaos", "the campaign stack's state directory (logs, builds)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, err
		}
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var mutations []string
	for m := range strings.SplitSeq(*mutate, ",") {
		if m = strings.TrimSpace(m); m != "" {
			mutations = append(mutations, m)
		}
	}
	root, err := moto.RepoRoot()
	if err != nil {
		return 1, err
	}
	state, err := filepath.Abs(*stateDir)
	if err != nil {
		return 1, err
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return 1, err
	}
	stackLog, err := os.Create(filepath.Join(state, "stack.log"))
	if err != nil {
		return 1, err
	}
	defer stackLog.Close()
	fmt.Fprintf(stdout, "chaos: %d jobs, seed %d; the stack's own output goes to %s\n", *n, *seed, stackLog.Name())
	l, err := chaos.Run(ctx, chaos.Config{Root: root, StateDir: state, N: *n, Seed: *seed, Faults: *faultSpec, KillAt: *killAt,
		Mutations: mutations, Concurrency: *concurrency, SESOutage: *sesOutage, WeeklyPartners: *weekly, Timeout: *timeout, NoClock: *noClock, Progress: stderr, Log: stackLog})
	if err != nil {
		if errors.Is(err, chaos.ErrConfig) {
			return 2, err
		}
		return 1, err
	}
	l.Print(stdout)
	if err := l.WriteJSON(*ledger); err != nil {
		return 1, err
	}
	fmt.Fprintf(stdout, "ledger written to %s\n", *ledger)
	if l.Failed() {
		return 1, errors.New("an invariant is broken (see the ledger above)")
	}
	return 0, nil
}
