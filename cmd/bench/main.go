// Command bench prints what runstwice costs as one table (`make bench`):
// the runner in-process (untraced, traced, and untraced against the commit
// before tracing), the worker on moto, the enqueue API through the local
// stack under concurrent load (then the idle stack's CPU), and each
// function's init time under the runtime emulator, with and without an
// OTLP endpoint — each figure beside its target.
//
//	bench [-rounds 15] [-n 1000] [-c 1,8,32] [-starts 5] [-baseline REV] [-skip-load]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/runstwice/runstwice/internal/cmdmain"
	"github.com/runstwice/runstwice/internal/dev/bench"
	"github.com/runstwice/runstwice/internal/dev/loadgen"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

func main() {
	cmdmain.Main(func(ctx context.Context) int { return cmdmain.Exit(os.Stderr, "bench", run(ctx), nil) })
}

func run(ctx context.Context) error {
	rounds := flag.Int("rounds", 15, "batches per worker measurement (the median is shown)")
	n := flag.Int("n", 1000, "enqueue requests per concurrency level")
	levels := flag.String("c", "1,8,32", "concurrent clients of the enqueue load, comma-separated")
	starts := flag.Int("starts", 5, "cold starts per function for the init time (the median is shown)")
	skipLoad := flag.Bool("skip-load", false, "leave out the enqueue load (it starts the whole local stack)")
	baseline := flag.String("baseline", bench.TracingBaseline, "the commit the untraced runner is compared with (git history)")
	flag.Parse()
	conc, err := loadgen.ParseLevels(*levels)
	if err != nil {
		return err
	}
	root, err := moto.RepoRoot()
	if err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "==> runner in-process")
	rows := bench.Runner()
	fmt.Fprintln(os.Stderr, "==> runner without a tracer, against "+*baseline)
	u, err := bench.Untraced(ctx, root, *baseline, 5)
	if err != nil {
		return err
	}
	rows = append(rows, u...)
	fmt.Fprintln(os.Stderr, "==> runner against release 4 (before any payload)")
	r4, err := bench.Against(ctx, root, bench.ReleaseFour, "release 4", 5)
	if err != nil {
		return err
	}
	rows = append(rows, r4...)

	fmt.Fprintln(os.Stderr, "==> worker on moto")
	bin, err := moto.Binary()
	if err != nil {
		return err
	}
	m, err := moto.StartFree(bin, nil)
	if err != nil {
		return err
	}
	defer m.Stop() // the init measure provisions the template on it too
	w, err := bench.Worker(ctx, m.Endpoint, *rounds)
	if err != nil {
		return err
	}
	rows = append(rows, w...)
	fmt.Fprintln(os.Stderr, "==> Do and the Idempotency-Key middleware on moto")
	d, err := bench.Do(ctx, m.Endpoint)
	if err != nil {
		return err
	}
	rows = append(rows, d...)
	fmt.Fprintln(os.Stderr, "==> a stream batch of 100 records on moto")
	st, err := bench.Streams(ctx, m.Endpoint, 3)
	if err != nil {
		return err
	}
	rows = append(rows, st...)
	fmt.Fprintln(os.Stderr, "==> the enqueue path's DynamoDB writes, single and batched, on moto")
	bc, err := bench.BatchCost(ctx, m.Endpoint, 20, 3)
	if err != nil {
		return err
	}
	rows = append(rows, bc...)

	if !*skipLoad {
		fmt.Fprintln(os.Stderr, "==> enqueue through the local stack")
		e, err := bench.Enqueue(ctx, root, *n, conc, os.Stderr)
		if err != nil {
			return err
		}
		rows = append(rows, e...)
	}

	fmt.Fprintln(os.Stderr, "==> init time under the emulator")
	in, err := bench.Init(ctx, root, m.Endpoint, *starts)
	if err != nil {
		return err
	}
	rows = append(rows, in...)

	fmt.Println()
	if err := bench.Print(os.Stdout, rows); err != nil {
		return err
	}
	if missed := bench.Missed(rows); len(missed) > 0 {
		fmt.Printf("\n%d figure(s) miss their target.\n", len(missed))
	}
	return nil
}
