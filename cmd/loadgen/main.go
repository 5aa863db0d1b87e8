// Command loadgen puts a bounded load of enqueue requests on the running
// local stack (`make run`) and prints what it measured: requests per
// second, latency percentiles and responses by status, one row per
// concurrency. With -idle it then measures the CPU the whole stack (devstack,
// moto, the emulators and functions) uses while idle.
//
//	go run ./cmd/loadgen [-n 1000] [-c 1,8,32] [-max 2m] [-idle 10s] [-url http://127.0.0.1:3000]
//
// It finds the stack through .devstack/stack.json and only talks to
// loopback addresses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/runstwice/runstwice/internal/cmdmain"
	"github.com/runstwice/runstwice/internal/dev/loadgen"
	"github.com/runstwice/runstwice/internal/dev/localapi"
)

func main() {
	cmdmain.Main(func(ctx context.Context) int {
		return cmdmain.Exit(os.Stderr, "loadgen", run(ctx, os.Args[1:], os.Stdout, os.Stderr), nil)
	})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	n := fs.Int("n", 1000, "requests per concurrency level")
	levels := fs.String("c", "32", "concurrent clients, or a comma-separated list of levels (e.g. 1,8,32)")
	maxDur := fs.Duration("max", 2*time.Minute, "time bound of each level")
	idle := fs.Duration("idle", 0, "after the load, measure the stack's idle CPU over this period (0: not)")
	settle := fs.Duration("settle", 15*time.Second, "with -idle: how long to let the workers drain first")
	apiURL := fs.String("url", "", "the API (default: the running stack's, from .devstack/stack.json)")
	stateDir := fs.String("state-dir", ".devstack", "where the running stack keeps stack.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conc, err := loadgen.ParseLevels(*levels)
	if err != nil {
		return err
	}
	info, running, err := localapi.ReadStackInfo(*stateDir)
	if err != nil {
		return err
	}
	if *apiURL == "" {
		if !running {
			return fmt.Errorf("no local stack is running (no live %s/%s): start `make run` first, or give -url", *stateDir, localapi.StackFile)
		}
		*apiURL = info.APIURL
	}
	runID := time.Now().UTC().Format("20060102T150405")
	results := make([]loadgen.Result, len(conc))
	for i, c := range conc {
		fmt.Fprintf(stderr, "%d requests, %d clients, against %s\n", *n, c, *apiURL)
		results[i], err = loadgen.Run(ctx, loadgen.Config{URL: *apiURL, Requests: *n, Concurrency: c, MaxDuration: *maxDur,
			RunID: fmt.Sprintf("%s-c%d", runID, c), Progress: stderr})
		if err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout)
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := r.WriteTable(stdout, conc[i]); err != nil {
			return err
		}
	}
	if *idle > 0 {
		if !running {
			return errors.New("-idle measures the running stack's processes: none found through stack.json")
		}
		fmt.Fprintf(stderr, "letting the workers drain for %v, then measuring idle CPU for %v…\n", *settle, *idle)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*settle):
		}
		cores, err := loadgen.TreeCPU(ctx, info.PID, *idle)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nidle stack (pid %d and its processes): %.1f%% of a core over %v\n", info.PID, cores*100, *idle)
	}
	return nil
}
