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
	// ready[i] is closed once results[i] is final: a continuation waits
	// for its parent's answer (it names the parent's job id), and a
	// batch's first job makes the answers of all its jobs.
	ready := make([]chan struct{}, len(planned))
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	work := make(chan int)
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for i := range work {
				if planned[i].leads() {
					members := c.enqueueBatch(ctx, planned, i, results, ready)
					done.Add(int64(len(members)))
					continue
				}
				results[i] = c.enqueue(ctx, planned[i], c.parentOf(ctx, planned[i], results, ready))
				close(ready[i])
				done.Add(1)
			}
		})
	}
feed:
	for i := range planned {
		if planned[i].batched() && !planned[i].leads() {
			continue // its batch's first job sends it
		}
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

// parentOf waits for the answer to job j's parent and returns the
// parent's job id: "" for a job that waits for none, or whose parent was
// never accepted (it is then sent as a job that waits for none).
func (c *campaign) parentOf(ctx context.Context, j plannedJob, results []result, ready []chan struct{}) string {
	if !j.continuation() {
		return ""
	}
	select {
	case <-ready[j.parent()]:
	case <-ctx.Done():
		return ""
	}
	if p := results[j.parent()]; p.Accepted {
		return p.JobID
	}
	c.problem(fmt.Errorf("chaos: job %d: its parent, job %d, was never accepted; sent without it", j.Index, j.parent()))
	return ""
}

// enqueue sends one planned job (with its twins), then its copies or its
// cancel. after is the job id of the job it waits for, if any.
func (c *campaign) enqueue(ctx context.Context, j plannedJob, after string) result {
	if j.Source == viaOutbox {
		return c.produce(ctx, j)
	}
	if after == "" {
		j.After = 0
	}
	c.front.inject(j.IdemKey, j.Front)
	opts := client.EnqueueOptions{Key: j.IdemKey, DelaySeconds: j.Delay, IdempotencyKey: j.IdemKey}
	if after != "" {
		opts.After, opts.AfterPolicy = after, j.AfterPolicy
	}
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
	if r.Accepted {
		c.afterAccept(ctx, &r)
	}
	return r
}

// afterAccept cancels an accepted job, or sends copies of its message, as
// planned.
func (c *campaign) afterAccept(ctx context.Context, r *result) {
	switch {
	case r.Job.Cancel:
		r.CancelAt = time.Now()
		r.Cancel = c.cancel(ctx, r.JobID)
	case r.Job.Copies > 0:
		r.CopiesSent = c.sendCopies(ctx, r.JobID, r.Job.Copies)
	}
}

// enqueueBatch sends the batch whose first job is planned[lead] (POST
// /v1/batches, retried by the client under the batch's key), fills in the
// results of its jobs, closes their ready channels, and returns their
// indexes. A job of the batch that waits for another of it names it
// "#k"; one that waits for a job outside waits for that job's answer
// first.
func (c *campaign) enqueueBatch(ctx context.Context, planned []plannedJob, lead int, results []result, ready []chan struct{}) []int {
	var members []int
	for i := lead; i < len(planned); i++ {
		if planned[i].Lead == lead+1 {
			members = append(members, i)
		}
	}
	defer func() {
		for _, i := range members {
			close(ready[i])
		}
	}()
	batch := make([]client.BatchJob, len(members))
	for n, i := range members {
		j := planned[i]
		batch[n] = client.BatchJob{Type: j.Kind.Type, Args: j.Args, Key: j.IdemKey, DelaySeconds: j.Delay}
		switch p := j.parent(); {
		case j.continuation() && planned[p].BatchKey == j.BatchKey:
			batch[n].After, batch[n].AfterPolicy = client.BatchRef(planned[p].BatchAt), j.AfterPolicy
		case j.continuation():
			if batch[n].After = c.parentOf(ctx, j, results, ready); batch[n].After != "" {
				batch[n].AfterPolicy = j.AfterPolicy
			}
		}
	}
	key := planned[lead].BatchKey
	c.front.inject(key, planned[lead].Front)
	res, err := c.api.EnqueueBatch(ctx, batch, client.BatchOptions{IdempotencyKey: key})
	for n, i := range members {
		r := result{Job: planned[i]}
		if r.Job.continuation() && batch[n].After == "" {
			r.Job.After = 0 // its parent was never accepted: it was sent without it
		}
		switch {
		case err != nil:
			r.Err = err.Error()
		default:
			r.Accepted, r.JobID = true, res.Jobs[n].JobID
		}
		if r.Accepted {
			c.afterAccept(ctx, &r)
		}
		results[i] = r
	}
	return members
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
			err := c.sender.Send(ctx, sqsqueue.Message{Queue: rec.Queue, Body: rec.Message, Type: rec.Type, CorrelationID: rec.CorrelationID})
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
