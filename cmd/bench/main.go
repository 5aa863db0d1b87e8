// Command bench prints what runstwice costs as one table (`make bench`):
// the runner in-process, the worker on moto, the enqueue API through the
// running local stack under load, and each function's init time under the
// runtime emulator, each figure beside its target.
//
//	bench [-rounds 5]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/runstwice/runstwice/internal/dev/bench"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	rounds := flag.Int("rounds", 5, "batches per worker measurement (the median is shown)")
	flag.Parse()
	ctx := context.Background()
	fmt.Fprintln(os.Stderr, "==> runner in-process")
	rows := bench.Runner()

	fmt.Fprintln(os.Stderr, "==> worker on moto")
	bin, err := moto.Binary()
	if err != nil {
		return err
	}
	m, err := moto.StartFree(bin, nil)
	if err != nil {
		return err
	}
	defer m.Stop()
	w, err := bench.Worker(ctx, m.Endpoint, *rounds)
	if err != nil {
		return err
	}
	rows = append(rows, w...)

	fmt.Println()
	if err := bench.Print(os.Stdout, rows); err != nil {
		return err
	}
	if missed := bench.Missed(rows); len(missed) > 0 {
		fmt.Printf("\n%d figure(s) miss their target.\n", len(missed))
	}
	return nil
}
