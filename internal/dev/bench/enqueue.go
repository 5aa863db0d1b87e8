package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/loadgen"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// Enqueue starts the local stack (on free ports, its state in a temporary
// directory), measures batches and continuations (Chain) on it, then sends
// requests enqueues at each concurrency through its API and, once its
// workers have drained, measures the idle CPU of the whole stack. Progress goes to progress.
func Enqueue(ctx context.Context, root string, requests int, levels []int, progress io.Writer) ([]Row, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	l, err := devstack.StartOnFreePorts(ctx, devstack.Options{
		Root: root, StateDir: dir, APIAddr: "127.0.0.1:0",
		ParkDelay: 10 * time.Second, ToggleTTL: 5 * time.Second, Out: io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: start the local stack: %w", err)
	}
	defer l.Stop()
	// Batches and continuations first, on the fresh stack, their jobs
	// drained before the load: moto's TransactWriteItems deep-copies each
	// table it writes (its rollback), once per item, so a batch's time on
	// moto grows with the items a load left behind (DynamoDB's does not).
	fmt.Fprintln(progress, "==> batches and continuations through the local stack")
	rows, err := Chain(ctx, l, 10, 30)
	if err != nil {
		return nil, err
	}
	if _, err := waitDrained(ctx, l, drainLimit); err != nil {
		return nil, err
	}
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
	// Idle means idle: the workers first drain what was enqueued (a fixed
	// wait measured a stack still sending the load's mail).
	drained, err := waitDrained(ctx, l, drainLimit)
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{"enqueue", "the workers drain the load's jobs after its last request", drained.Round(100 * time.Millisecond).String(), "", true})
	cores, err := loadgen.TreeCPU(ctx, os.Getpid(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{"enqueue", "idle stack afterwards: CPU", fmt.Sprintf("%.1f %% of a core", cores*100), "< 5 %", cores < 0.05})
	return rows, nil
}

// drainLimit bounds the wait for the workers to drain the load.
const drainLimit = 10 * time.Minute

// waitDrained waits until every queue of the stack (the work queues and the
// DLQ) holds nothing visible, in flight or delayed, three checks in a row a
// second apart, and returns how long that took. It fails after limit.
func waitDrained(ctx context.Context, l *devstack.Local, limit time.Duration) (time.Duration, error) {
	return waitQuiet(ctx, l, l.WorkQueueURLs(), limit)
}

// waitQuiet waits until the queues urls hold no message (three reads a
// second apart) and returns how long that took.
func waitQuiet(ctx context.Context, l *devstack.Local, urls []string, limit time.Duration) (time.Duration, error) {
	client := sqs.NewFromConfig(moto.Config(l.Endpoint, moto.Region))
	start := time.Now()
	for quiet := 0; quiet < 3; {
		if time.Since(start) > limit {
			return 0, fmt.Errorf("bench: the workers did not drain the load within %s", limit)
		}
		n, err := devstack.Backlog(ctx, client, urls)
		if err != nil {
			return 0, fmt.Errorf("bench: %w", err)
		}
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if err := smithytime.SleepWithContext(ctx, time.Second); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func p99Target(c int) string {
	if c == 32 {
		return "p99 < 1 s"
	}
	return ""
}

func tempDir() (string, error) { return os.MkdirTemp("", "runstwice-bench-") }
