package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
)

// result is what became of one planned job's enqueue.
type result struct {
	Job plannedJob
	// Accepted: the API answered 202 (or 200) with a job id, JobID.
	Accepted bool
	JobID    string
	// Err is the last error of a request that was never accepted.
	Err string
	// Cancel is the DELETE's outcome: "" (not asked), "Cancelled" (202),
	// or the state a 409 named; CancelAt when it was asked.
	Cancel   string
	CancelAt time.Time
	// CopiesSent is how many copies of the message went straight to the
	// queue.
	CopiesSent int
	// Refused: an outbox job's transaction failed its condition, as
	// planned (Job.Refuse), so there is no job, by design. Rewritten: its
	// item was written a second time.
	Refused, Rewritten bool
}

// load enqueues every planned job over HTTP with the campaign's
// concurrency, runs the script as the load goes, and returns the results
// in plan order.
func (c *campaign) load(ctx context.Context, planned []plannedJob) []result {
	results := make([]result, len(planned))
	var done atomic.Int64
	c.progress.phase("enqueueing")
	c.progress.setLoad(len(planned), &done)
	var wg sync.WaitGroup
	c.runScript(ctx, func() float64 { return float64(done.Load()) / float64(len(planned)) }, &wg)
	work := make(chan int)
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for i := range work {
				results[i] = c.enqueue(ctx, planned[i])
				done.Add(1)
			}
		})
	}
feed:
	for i := range planned {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return results
}

// enqueue sends one planned job (with its twins), then its copies or its
// cancel.
func (c *campaign) enqueue(ctx context.Context, j plannedJob) result {
	if j.Source == viaOutbox {
		return c.produce(ctx, j)
	}
	c.front.inject(j.IdemKey, j.Front)
	opts := client.EnqueueOptions{Key: j.IdemKey, DelaySeconds: j.Delay, IdempotencyKey: j.IdemKey}
	answers := make([]*client.Result, 1+j.Twins)
	errs := make([]error, len(answers))
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i], errs[i] = c.api.Enqueue(ctx, j.Kind.Type, j.Args, opts) })
	}
	wg.Wait()
	r := result{Job: j}
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			r.Err = errs[i].Error()
		case r.JobID != "" && a.JobID != r.JobID:
			c.problem(fmt.Errorf("chaos: job %d: twins with one Idempotency-Key got jobs %s and %s", j.Index, r.JobID, a.JobID))
		default:
			r.Accepted, r.JobID = true, a.JobID
		}
	}
	if !r.Accepted {
		return r
	}
	switch {
	case j.Cancel:
		r.CancelAt = time.Now()
		r.Cancel = c.cancel(ctx, r.JobID)
	case j.Copies > 0:
		r.CopiesSent = c.sendCopies(ctx, r.JobID, j.Copies)
	}
	return r
}

// cancel asks the API to cancel jobID and returns the state it answered.
func (c *campaign) cancel(ctx context.Context, jobID string) string {
	job, err := c.api.Cancel(ctx, jobID)
	if err == nil {
		return string(job.State)
	}
	var p *client.Problem
	if errors.As(err, &p) && p.State != "" {
		return string(p.State)
	}
	c.problem(fmt.Errorf("chaos: cancel %s: %w", jobID, err))
	return ""
}

// sendCopies sends n copies of jobID's message straight to its queue, all
// at once (duplicate deliveries, some of them concurrent with the
// original), and returns how many SQS accepted.
func (c *campaign) sendCopies(ctx context.Context, jobID string, n int) int {
	rec, err := jobs.NewStore(c.db, c.res.Jobs, nil).Get(ctx, jobID)
	if err != nil {
		c.problem(fmt.Errorf("chaos: read the message of %s: %w", jobID, err))
		return 0
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			err := c.sender.Send(ctx, sqsqueue.Message{Queue: engine.Queue(rec.Queue), Body: rec.Message, Type: rec.Type, CorrelationID: rec.CorrelationID})
			if err != nil {
				c.problem(fmt.Errorf("chaos: copy of %s: %w", jobID, err))
				return
			}
			sent.Add(1)
		})
	}
	wg.Wait()
	return int(sent.Load())
}
