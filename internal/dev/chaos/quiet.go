package chaos

import (
	"context"
	"fmt"
	"time"

	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// quietChecks is how many checks in a row, a second apart, must find the
// stack quiet.
const quietChecks = 3

// waitQuiet waits until the stack is quiet: every queue (the work queues
// and the DLQ) empty — nothing visible, in flight or delayed — and no
// function invocation under way, several checks in a row. It reports
// false when ctx ended first.
func (c *campaign) waitQuiet(ctx context.Context) bool {
	urls := c.stack.WorkQueueURLs()
	stable := 0
	for ctx.Err() == nil {
		n, err := devstack.Backlog(ctx, c.sqs, urls)
		busy := c.obs.inFlight.Load()
		c.progress.setQueued(n, int(busy))
		if err == nil && n == 0 && busy == 0 {
			stable++
			if stable == quietChecks {
				return true
			}
		} else {
			stable = 0
		}
		_ = smithytime.SleepWithContext(ctx, time.Second)
	}
	c.problem(errNotQuiet)
	return false
}

// redrive sends the dead letters back to their queues the way an
// operator's `jobctl dlq redrive` does, each letter at most
// maxRedrivesPerLetter times (a poisoned job comes back every time), and
// returns how many went back.
func (c *campaign) redrive(ctx context.Context) (int, error) {
	store := deadletter.NewStore(c.db, c.res.DeadLetters)
	r := deadletter.NewRedriver(store, c.sender, contract.Registry())
	r.Jobs = jobs.NewLifecycle(c.db, c.res.Jobs)
	r.Markers = marker.NewResetter(c.db, c.res.Markers)
	letters, err := store.Select(ctx, deadletter.Filter{Status: deadletter.StatusDead})
	if err != nil {
		return 0, fmt.Errorf("chaos: redrive: %w", err)
	}
	n := 0
	for _, rec := range letters {
		if c.redriven[rec.ID] >= maxRedrivesPerLetter {
			continue
		}
		c.redriven[rec.ID]++
		out, err := r.RedriveRecord(ctx, rec, deadletter.Options{})
		switch {
		case err != nil:
			c.problem(fmt.Errorf("chaos: redrive %s: %w", rec.ID, err))
		case out.Outcome == deadletter.Redrove:
			n++
		}
	}
	c.mark(fmt.Sprintf("redrove %d letters", n))
	return n, nil
}

// maxRedrivesPerLetter is how often the campaign redrives one letter.
const maxRedrivesPerLetter = 2
