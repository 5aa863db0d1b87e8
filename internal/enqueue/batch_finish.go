package enqueue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// batchConcurrency bounds how many jobs of a batch are reserved and handed
// over at once.
const batchConcurrency = 16

// batchBusyTries is how often a job whose key another request holds
// (jobs.Busy) is tried before the finish gives up (its finisher or a retry
// completes the batch).
const batchBusyTries = 3

// FinishBatch finishes batch batchID if its accept was cut short: the way
// in of the batch's finisher (runstwice.batch-finish.v1). A batch that was
// never written (its accept was refused, or stopped before it wrote the
// batch) or is accepted already is left alone; one still Accepting gets
// every job reserved and handed over, as its accept would have, and is
// marked accepted. Its request's stored answer is not written here: a
// retry of that request finds the batch accepted and answers from it.
func (h *Handler) FinishBatch(ctx context.Context, batchID string) error {
	if h.Batches == nil {
		return errors.New("enqueue: batches are not configured")
	}
	log := h.logger(ctx).With("batchId", batchID)
	b, err := h.Batches.GetBatch(ctx, batchID)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		log.Info("enqueue: batch finisher: no such batch; its accept never wrote it")
		return nil
	case err != nil:
		return fmt.Errorf("enqueue: finish batch %s: %w", batchID, err)
	case b.State == jobs.BatchAccepted:
		return nil
	}
	// One try at a time decides the batch's jobs: while a retry of its
	// request holds it, the finisher fails and its job is retried.
	if b, err = h.Batches.TakeBatch(ctx, b, rand.Text()); err != nil {
		return fmt.Errorf("enqueue: finish batch %s: %w", batchID, err)
	}
	b, handed, err := h.finishBatch(ctx, log, b)
	if err == nil {
		err = h.promoteBatch(ctx, handed)
	}
	if err == nil {
		err = h.Batches.AcceptBatch(ctx, b)
	}
	if err != nil {
		h.releaseBatch(ctx, log, b)
		return fmt.Errorf("enqueue: finish batch %s: %w", batchID, err)
	}
	log.Info("enqueue: batch finished by its finisher", "jobs", len(b.Jobs))
	return nil
}

// finishBatch reserves and hands over every job of b as its own request
// would (finishJob), several at once, each after the earlier job its after
// names; then decides the continuations whose parent has already ended.
// The new jobs of the batch that wait for none are reserved first in
// transactions of jobs.MaxReserveNew (preReserve); the others, and all of
// them when a transaction finds a key taken, one by one. It returns b with
// its answers and the jobs handed over, whose promotion (queued) the
// caller writes. It is idempotent: every job's id is derived, so a second
// finish finds each job as the first left it.
func (h *Handler) finishBatch(ctx context.Context, log *slog.Logger, b jobs.Batch) (jobs.Batch, []jobs.Job, error) {
	earlier, err := h.earlierResolutions(ctx, b)
	if err != nil {
		return b, nil, err
	}
	pre, err := h.preReserve(ctx, b, earlier)
	if err != nil {
		return b, nil, err
	}
	killpoint.At(killpoint.MidBatch) // the chaos build's: reserved, none sent
	done := make([]chan struct{}, len(b.Jobs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	errs := make([]error, len(b.Jobs))
	sent := make([]*jobs.Job, len(b.Jobs))
	own := make(map[string]bool, len(b.Jobs))
	for _, bj := range b.Jobs {
		own[bj.Job.ID] = true
	}
	for k, x := range earlier {
		if x == b.Jobs[k].Job.ID {
			delete(earlier, k) // its own job: deciding it again finds it
		}
	}
	sem := make(chan struct{}, batchConcurrency)
	var wg sync.WaitGroup
	for i := range b.Jobs {
		wg.Go(func() {
			defer close(done[i])
			j := b.Jobs[i].Job
			if n, ok := batchRef(j.After); ok {
				<-done[n]
				if errs[n] != nil {
					errs[i] = fmt.Errorf("jobs[%d] waits for jobs[%d], which failed", i, n)
					return
				}
				j.After = b.Jobs[n].JobID
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			if x, ok := earlier[i]; ok {
				if own[x] {
					// A twin of the batch (one key): it is that job, with
					// the state the batch answers for it (below), never
					// its record read mid-promotion.
					b.Jobs[i].JobID, b.Jobs[i].Deduplicated = x, true
					return
				}
				errs[i] = h.answerAs(ctx, &b.Jobs[i], x)
				return
			}
			sent[i], errs[i] = h.finishJob(ctx, log, &b.Jobs[i], j, pre[i], own)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return b, nil, err
	}
	for k, x := range earlier {
		if own[x] {
			if t := slices.IndexFunc(b.Jobs, func(bj jobs.BatchJob) bool { return bj.JobID == x && !bj.Deduplicated }); t >= 0 {
				b.Jobs[k].State = b.Jobs[t].State
			} else if err := h.answerAs(ctx, &b.Jobs[k], x); err != nil {
				return b, nil, err
			}
		}
	}
	if err := h.decideContinuations(ctx, log, &b); err != nil {
		return b, nil, err
	}
	var handed []jobs.Job
	for _, j := range sent {
		if j != nil {
			handed = append(handed, *j)
		}
	}
	return b, handed, nil
}

// preReserve reserves the batch's new jobs that wait for no other and
// hold a key no other job of the batch holds, jobs.MaxReserveNew to a
// transaction, and returns their decisions by index (nil for a job left
// to finishJob's own reservation: a transaction that found a key or an id
// taken reserves nothing, and its jobs are decided one by one).
func (h *Handler) preReserve(ctx context.Context, b jobs.Batch, earlier map[int]string) ([]*jobs.Decision, error) {
	out := make([]*jobs.Decision, len(b.Jobs))
	keys := map[string]int{}
	for _, bj := range b.Jobs {
		keys[jobs.DedupPK(bj.Job.Caller, bj.Job.Type, bj.Job.Key)]++
	}
	var chunk []int
	// flush reserves the chunk; a job whose key or id a transaction finds
	// taken is left to finishJob, and the rest are tried again (twice at
	// most: a key taken meanwhile, then one by one).
	flush := func() error {
		for try := 0; len(chunk) > 0 && try < 3; try++ {
			js := make([]jobs.Job, len(chunk))
			for i, n := range chunk {
				js[i] = b.Jobs[n].Job
			}
			reserved, taken, err := h.Batches.ReserveNew(ctx, js)
			if err != nil {
				return err
			}
			if len(taken) == 0 {
				for i, n := range chunk {
					out[n] = &jobs.Decision{Outcome: jobs.Reserved, Job: reserved[i], Own: true}
				}
				break
			}
			chunk = slices.DeleteFunc(chunk, func(n int) bool {
				return slices.ContainsFunc(taken, func(i int) bool { return js[i].ID == b.Jobs[n].Job.ID })
			})
		}
		chunk = chunk[:0]
		return nil
	}
	for i, bj := range b.Jobs {
		if _, answered := earlier[i]; answered || bj.Job.After != "" || keys[jobs.DedupPK(bj.Job.Caller, bj.Job.Type, bj.Job.Key)] > 1 {
			continue
		}
		if chunk = append(chunk, i); len(chunk) == jobs.MaxReserveNew {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	return out, flush()
}

// finishJob reserves job j of batch job bj (its after resolved; pre is its
// reservation when preReserve made it) and hands it over, recording bj's
// answer: its own job (sent, or waiting for its parent), or the active job
// it deduplicated onto. A job whose policy refuses it in the instant
// between the batch's check and its reservation is answered as the job
// that refused it, deduplicated; one whose key another job of the batch
// (own) holds is that job, deduplicated. It returns the job it handed over,
// for its promotion.
func (h *Handler) finishJob(ctx context.Context, log *slog.Logger, bj *jobs.BatchJob, j jobs.Job, pre *jobs.Decision, own map[string]bool) (*jobs.Job, error) {
	ctx = nameJob(ctx, j.ID, j.Type)
	var d jobs.Decision
	if pre != nil {
		d = *pre
	}
	for try := 0; pre == nil && try < batchBusyTries; try++ {
		var err error
		d, err = h.Jobs.Reserve(ctx, j, bj.Policy)
		if errors.Is(err, jobs.ErrParentNotFound) || errors.Is(err, jobs.ErrTooManyContinuations) {
			// Its parent refused it in the instant since the batch's
			// checks: it is made Cancelled with the reason, so the batch
			// still completes and answers every job.
			reason := fmt.Sprintf("the job it waits for, %s, refused it: %v", j.After, err)
			d, err = h.Batches.ReserveRefused(ctx, j, reason)
		}
		if err != nil {
			return nil, fmt.Errorf("jobs[%d]: reserve: %w", bj.Index, err)
		}
		if d.Outcome != jobs.Busy {
			break
		}
		if own[d.Job.ID] {
			// Another job of this very batch holds the key: it is being
			// handed over now and promoted with the batch's answer, so
			// this one is it, deduplicated, as a second request would be.
			d.Outcome, d.Own, d.Job.State = jobs.Duplicate, false, d.Job.QueuedState()
			break
		}
		if try == batchBusyTries-1 {
			return nil, fmt.Errorf("jobs[%d]: another request holds its key", bj.Index)
		}
		time.Sleep(min(d.RetryAfter, time.Second))
	}
	if d.Own && !sameJob(d.Job, j) {
		return nil, fmt.Errorf("jobs[%d]: %w", bj.Index, jobs.ErrBatchMismatch)
	}
	bj.JobID, bj.State, bj.Deduplicated = d.Job.ID, d.Job.State, !d.Own
	if d.Outcome != jobs.Reserved && d.Outcome != jobs.Resume || d.Job.Stored() == jobs.StateAwaitingContinuation {
		return nil, nil
	}
	if what, err := h.hand(ctx, &d.Job); err != nil {
		return nil, fmt.Errorf("jobs[%d]: hand to %s: %w", bj.Index, what, err)
	}
	bj.State = d.Job.QueuedState()
	log.Debug("enqueue: batch job handed over", obs.KeyJobID, d.Job.ID, "index", bj.Index)
	return &d.Job, nil
}

// promoteBatch writes the promotion of every job handed over, one
// UpdateItem each (a job that meanwhile left Pending keeps its story).
func (h *Handler) promoteBatch(ctx context.Context, handed []jobs.Job) error {
	var errs []error
	for _, j := range handed {
		errs = append(errs, h.Jobs.Promote(ctx, j))
	}
	return errors.Join(errs...)
}

// decideContinuations decides at once the batch's continuations whose
// parent has already ended (one release per parent), as a single
// enqueue's does. When the release of one of them fails (its send, or a
// read or write before it) the batch's try fails as it does when a job's
// hand-over fails: its retry (or its finisher) sends that continuation,
// now Pending, or decides it again.
func (h *Handler) decideContinuations(ctx context.Context, log *slog.Logger, b *jobs.Batch) error {
	var parents []string
	for _, bj := range b.Jobs {
		if p := resolvedAfter(*b, bj); bj.State == jobs.StateAwaitingContinuation && !bj.Deduplicated && !slices.Contains(parents, p) {
			parents = append(parents, p)
		}
	}
	for _, p := range parents {
		rep, err := h.Jobs.ReleaseContinuations(ctx, p, h.SendFunc())
		for i := range b.Jobs {
			bj := &b.Jobs[i]
			mine := bj.State == jobs.StateAwaitingContinuation && !bj.Deduplicated && resolvedAfter(*b, *bj) == p
			switch id := bj.JobID; {
			case slices.Contains(rep.Sent, id):
				bj.State = jobs.StateEnqueued
			case slices.Contains(rep.Cancelled, id):
				bj.State = jobs.StateCancelled
			case mine && (slices.Contains(rep.Failed, id) || err != nil && !rep.Decided(id)):
				return fmt.Errorf("jobs[%d]: release after %s: %w", bj.Index, p, err)
			case mine && rep.State.Terminal():
				// Decided or being sent by another release, or kept
				// waiting by its policy: its record says which.
				if cur, gerr := h.Jobs.Get(ctx, id); gerr == nil {
					bj.State = cur.State
				}
			}
		}
		if err != nil {
			log.Warn("enqueue: batch: a release of another job's continuations failed", obs.KeyError, obs.Redact(err))
		}
	}
	return nil
}

// resolvedAfter is the job id batch job bj waits for.
func resolvedAfter(b jobs.Batch, bj jobs.BatchJob) string {
	if n, ok := batchRef(bj.Job.After); ok {
		return b.Jobs[n].JobID
	}
	return bj.Job.After
}

// batchJobAnswer is one job of a batch's answer.
type batchJobAnswer struct {
	Index        int        `json:"index"`
	JobID        string     `json:"jobId"`
	State        jobs.State `json:"state"`
	Deduplicated bool       `json:"deduplicated"`
}

// batchAnswer is the body of POST /v1/batches's 202 and of GET
// /v1/batches/{batchId} (which adds the batch's state and the count of its
// jobs per state).
type batchAnswer struct {
	BatchID string             `json:"batchId"`
	State   string             `json:"state,omitempty"`
	Jobs    []batchJobAnswer   `json:"jobs"`
	Counts  map[jobs.State]int `json:"counts,omitempty"`
}

// batchResponse is b's answer; withCounts adds its state and counts.
func batchResponse(status int, b jobs.Batch, withCounts bool) idempotency.Response {
	a := batchAnswer{BatchID: b.ID, Jobs: make([]batchJobAnswer, len(b.Jobs))}
	for i, bj := range b.Jobs {
		id := bj.JobID
		if id == "" {
			id = bj.Job.ID
		}
		a.Jobs[i] = batchJobAnswer{Index: bj.Index, JobID: id, State: bj.State, Deduplicated: bj.Deduplicated}
	}
	if withCounts {
		a.State, a.Counts = b.State, map[jobs.State]int{}
		for _, j := range a.Jobs {
			a.Counts[j.State]++
		}
	}
	return idempotency.Response{Status: status, Headers: map[string]string{
		HeaderContentType: ContentTypeJSON, HeaderLocation: batchesPath + "/" + b.ID,
	}, Body: mustJSON(a)}
}

// getBatch serves GET /v1/batches/{batchId}: the batch's jobs with their
// states now, and the count per state, to the batch's own caller (anyone
// else's batch, or none, is 404). A job of a batch still being accepted
// that has no record yet reads Pending.
func (h *Handler) getBatch(ctx context.Context, log *slog.Logger, caller, batchID, corr string) reply {
	if h.Batches == nil {
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "batches are not configured").response(corr)
	}
	if !message.CanonicalUUID(batchID) {
		return newProblem(http.StatusNotFound, ProblemNotFound, "you have no batch "+batchID+" (a batch id is a lowercase UUID)").response(corr)
	}
	b, err := h.Batches.GetBatch(ctx, batchID)
	switch {
	case errors.Is(err, jobs.ErrNotFound) || (err == nil && b.Caller != caller):
		return newProblem(http.StatusNotFound, ProblemNotFound, "you have no batch "+batchID).response(corr)
	case err != nil:
		log.Error("enqueue: get batch", obs.KeyError, obs.Redact(err))
		return unavailable(corr)
	}
	accepted := b.State == jobs.BatchAccepted
	if err := h.restate(ctx, &b); err != nil {
		log.Error("enqueue: get batch: its jobs", obs.KeyError, obs.Redact(err))
		return unavailable(corr)
	}
	for i := range b.Jobs {
		// A job of a batch still being accepted that has no record yet
		// is on its way (Pending); one of an accepted batch whose record
		// is gone reads what its marker says, or Expired.
		if !accepted && b.Jobs[i].State == jobs.StateExpired {
			b.Jobs[i].State = jobs.StatePending
		}
	}
	return toAPI(batchResponse(http.StatusOK, b, true))
}

// sqsQueueMessage is the message of an envelope body of type jt.
func sqsQueueMessage(jt message.JobType, body []byte, corr string, delay time.Duration) sqsqueue.Message {
	return sqsqueue.Message{Queue: string(jt.Queue), Body: string(body), Type: jt.Name, CorrelationID: corr, Delay: delay}
}
