package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/loadgen"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// Enqueue starts the local stack (on free ports, its state in a temporary
// directory), sends requests enqueues at each concurrency through its API,
// and then measures the idle CPU of the whole stack once its workers have
// drained. Progress goes to progress.
func Enqueue(ctx context.Context, root string, requests int, levels []int, progress io.Writer) ([]Row, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	port, err := moto.FreePort()
	if err != nil {
		return nil, err
	}
	l, err := devstack.Start(ctx, devstack.Options{
		Root: root, StateDir: dir, MotoPort: port, APIAddr: "127.0.0.1:0",
		ParkDelay: 10 * time.Second, ToggleTTL: 5 * time.Second, Out: io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: start the local stack: %w", err)
	}
	defer l.Stop()
	var rows []Row
	for _, c := range levels {
		r, err := loadgen.Run(ctx, loadgen.Config{URL: l.APIURL, Requests: requests, Concurrency: c, MaxDuration: 3 * time.Minute,
			RunID: fmt.Sprintf("bench-%d-c%d", time.Now().Unix(), c), Progress: progress})
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%d enqueues, %d client(s)", requests, c)
		rows = append(rows,
			Row{"enqueue", name + ": requests/s", fmt.Sprintf("%.1f", r.PerSecond), "", true},
			Row{"enqueue", name + ": p50 / p95 / p99", fmt.Sprintf("%s / %s / %s", ms(r.P50), ms(r.P95), ms(r.P99)), p99Target(c), c != 32 || r.P99 < time.Second},
			Row{"enqueue", name + ": 5xx or no answer", fmt.Sprint(r.ServerErrors + r.Failed), "0", r.ServerErrors+r.Failed == 0},
		)
	}
	time.Sleep(15 * time.Second) // the workers drain what was enqueued
	cores, err := loadgen.TreeCPU(ctx, os.Getpid(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{"enqueue", "idle stack afterwards: CPU", fmt.Sprintf("%.1f %% of a core", cores*100), "< 5 %", cores < 0.05})
	return rows, nil
}

func p99Target(c int) string {
	if c == 32 {
		return "p99 < 1 s"
	}
	return ""
}

func tempDir() (string, error) { return os.MkdirTemp("", "runstwice-bench-") }
