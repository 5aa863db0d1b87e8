package enqueue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// batchesPath is the path of POST /v1/batches; GET /v1/batches/{batchId}
// is below it.
const batchesPath = "/v1/batches"

// Batches keeps the batches; *jobs.Store is one.
type Batches interface {
	PutBatch(ctx context.Context, b jobs.Batch, until time.Time) (jobs.Batch, error)
	GetBatch(ctx context.Context, batchID string) (jobs.Batch, error)
	// TakeBatch makes a try (owner) the one that decides a batch's jobs,
	// for jobs.BatchLease (jobs.ErrBatchBusy while another holds it).
	TakeBatch(ctx context.Context, b jobs.Batch, owner string) (jobs.Batch, error)
	// ReleaseBatch ends a try's hold when it stops without accepting.
	ReleaseBatch(ctx context.Context, b jobs.Batch) error
	BatchAccepted(b jobs.Batch) idempotency.Companion
	AcceptBatch(ctx context.Context, b jobs.Batch) error
	// Views reads jobs with their states, Records as stored; Continuations
	// the jobs waiting for one; Holder the job a key is held by.
	Views(ctx context.Context, keys []engine.Key) ([]jobs.Job, error)
	Records(ctx context.Context, ids []string) (map[string]jobs.Job, error)
	Continuations(ctx context.Context, parentID string) ([]string, error)
	Holder(ctx context.Context, job jobs.Job) (jobs.Job, bool, error)
	// ReserveRefused makes a continuation its parent refused after the
	// batch was written Cancelled, with the reason.
	ReserveRefused(ctx context.Context, job jobs.Job, reason string) (jobs.Decision, error)
	// ReserveNew reserves new jobs in one transaction, all or none (and
	// then which were taken).
	ReserveNew(ctx context.Context, js []jobs.Job) ([]jobs.Job, []int, error)
}

// FinishDelay is how long after a batch's accept began its finisher
// (runstwice.batch-finish.v1) arrives: longer than the request's lock, so
// an accept still running is never raced, and short enough that a batch cut
// short by a crash completes within a minute or two.
const FinishDelay = 60 * time.Second

// BatchID is the id of the batch caller sends under Idempotency-Key key,
// and BatchJobID the id of its index-th job: both derived, so a retry of a
// batch names the same jobs, and never a single request's job (the
// separator is no character an Idempotency-Key may hold).
func BatchID(caller, key string) string { return message.DeriveMessageID(caller, "batch\x00"+key) }

// BatchJobID is the id of job index of the batch caller sends under key.
func BatchJobID(caller, key string, index int) string {
	return message.DeriveMessageID(caller, key+"\x00"+strconv.Itoa(index))
}

// postBatch serves POST /v1/batches: every job valid, or none made.
func (h *Handler) postBatch(w http.ResponseWriter, r *http.Request, c *call) *Problem {
	if h.Batches == nil {
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "batches are not configured")
	}
	body, key, p := keyedBody(r, MaxBatchBytes, "the batch", "name this batch")
	if p != nil {
		return p
	}
	items, p := h.decodeBatch(body, h.now())
	if p != nil {
		return p
	}
	fp, err := idempotency.Fingerprint(http.MethodPost, batchesPath, body)
	if err != nil {
		return validation("body", "is not valid JSON")
	}
	trace := traceHeader(r.Context(), r.Header)
	log := c.log.With("batchId", BatchID(c.caller, key))
	h.keyed(w, r, c, keyedRequest{key: key, route: batchesPath, body: body, keep: keepsBatch},
		func(ctx context.Context, lock idempotency.Lock) (reply, bool) {
			return h.acceptBatch(ctx, log, lock, c.caller, key, fp, c.corr, trace, items)
		})
	return nil
}

// acceptBatch accepts the batch under the request's lock. In order: every
// refusal that depends on what exists (a parent the caller cannot see, a
// parent with too many continuations, a duplicate policy that refuses a
// job) is found by reads alone, and refuses the whole batch with nothing
// written; the finisher is sent; the batch's item is written (from here the
// batch completes, by this request, its retry or the finisher); every job
// is reserved and handed over (finishBatch); the answer is stored with the
// batch marked accepted, in one transaction.
func (h *Handler) acceptBatch(ctx context.Context, log *slog.Logger, lock idempotency.Lock, caller, key, fp, corr, trace string, items []batchItem) (reply, bool) {
	now := h.now().UTC()
	b := jobs.Batch{ID: BatchID(caller, key), Caller: caller, Fingerprint: fp, CreatedAt: now.UnixMilli(), Jobs: make([]jobs.BatchJob, len(items))}
	due := time.Time{}
	for i, it := range items {
		id := BatchJobID(caller, key, i)
		jobFP := fp + "#" + strconv.Itoa(i)
		j, p := h.newJob(nameJob(ctx, id, it.jt.Name), log, it.jt, it.in, caller, id, jobFP, corr, trace, now)
		if p != nil {
			p.Detail = fmt.Sprintf("jobs[%d]: %s", i, p.Detail)
			return p.response(corr), false
		}
		b.Jobs[i] = jobs.BatchJob{Index: i, Job: j, Policy: it.in.Policy}
		if d := answerDue(j); d.After(due) {
			due = d
		}
	}
	// A retry of a batch already written is answered from it, never
	// refused by the checks of one not yet written (they would count its
	// own jobs against it).
	prior, err := h.Batches.GetBatch(ctx, b.ID)
	switch {
	case err == nil && (prior.Caller != caller || prior.Fingerprint != fp):
		return keyReused(corr), false
	case err != nil && !errors.Is(err, jobs.ErrNotFound):
		log.Error("enqueue: batch: read", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	case err != nil:
		if p := h.refusesBatch(ctx, log, b); p != nil {
			return p.response(corr), false
		}
	}
	if err := h.sendFinisher(ctx, b.ID, corr); err != nil {
		log.Error("enqueue: batch: send its finisher", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	}
	// This try holds the batch it writes; a retry takes over the one an
	// earlier try wrote once that try's lease is over, so no two tries (a
	// retry and the finisher) decide its jobs at once.
	owner := rand.Text()
	b.TakenBy, b.TakenUntil = owner, now.Add(jobs.BatchLease).UnixMilli()
	stored, err := h.Batches.PutBatch(ctx, b, lifetime.Until(now, due, lifetime.StoredAnswer))
	if err == nil && stored.State != jobs.BatchAccepted && stored.TakenBy != owner {
		stored, err = h.Batches.TakeBatch(ctx, stored, owner)
	}
	// A batch another try holds is answered when that hold ends.
	holdLeft := max(time.UnixMilli(stored.TakenUntil).Sub(h.now()), time.Second)
	switch {
	case errors.Is(err, jobs.ErrBatchMismatch):
		return keyReused(corr), false
	case errors.Is(err, jobs.ErrBatchBusy):
		p := newProblem(http.StatusConflict, ProblemInFlight, "another try of this batch (its finisher, or an earlier request) is accepting it; retry later")
		p.retryAfter = min(holdLeft, jobs.BatchLease)
		return p.response(corr), false
	case err != nil:
		log.Error("enqueue: batch: put", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	}
	killpoint.At(killpoint.MidBatch) // the chaos build's: written, nothing reserved
	accepted := false
	defer func() {
		if !accepted && stored.TakenBy == owner {
			h.releaseBatch(ctx, log, stored)
		}
	}()
	var handed []jobs.Job
	if stored.State != jobs.BatchAccepted {
		if stored, handed, err = h.finishBatch(ctx, log, stored); err != nil {
			log.Error("enqueue: batch: finish; its finisher or a retry completes it", obs.KeyError, obs.Redact(err))
			return unavailable(corr), false
		}
	}
	killpoint.At(killpoint.MidBatch) // sent, the answer not stored
	resp, err := h.completeBatch(ctx, lock, lifetime.Until(now, due, lifetime.StoredAnswer), stored, handed)
	if err != nil && !errors.Is(err, idempotency.ErrLockLost) {
		log.Error("enqueue: batch: complete", obs.KeyError, obs.Redact(err))
		return unavailable(corr), false
	}
	accepted = true
	log.Info("enqueue: batch accepted", "jobs", len(stored.Jobs))
	return toAPI(resp), true
}

// releaseBatch ends this try's hold of batch b (it stops without accepting
// it); a failure is logged: the hold then ends with its lease.
func (h *Handler) releaseBatch(ctx context.Context, log *slog.Logger, b jobs.Batch) {
	if err := h.Batches.ReleaseBatch(ctx, b); err != nil {
		log.Warn("enqueue: batch: release its hold; the next try waits out its lease", obs.KeyError, obs.Redact(err))
	}
}

// maxCompanions is how many promotions ride in the completion's
// transaction: its 100 elements less the answer and the batch.
const maxCompanions = 98

// keyReused is the 422 of an Idempotency-Key that holds another batch (or
// another batch's jobs, its answer gone).
func keyReused(corr string) reply {
	return newProblem(http.StatusUnprocessableEntity, ProblemKeyMismatch,
		"this Idempotency-Key was already used for a different batch; use a new key; no job was made").response(corr)
}

// completeBatch stores batch b's answer (kept until keep), the batch
// accepted and the promotions of the jobs it handed over in one
// transaction (those beyond what it holds are written first, one by one),
// and returns the answer. When a promotion's condition fails (a job
// cancelled meanwhile), every promotion is written on its own (each keeps
// what its record says), the jobs' states are read again, and the answer
// says them, with the batch, after them: it never says queued of a job its
// record says was cancelled.
func (h *Handler) completeBatch(ctx context.Context, lock idempotency.Lock, keep time.Time, b jobs.Batch, handed []jobs.Job) (idempotency.Response, error) {
	if len(handed) > maxCompanions {
		if err := h.promoteBatch(ctx, handed[maxCompanions:]); err != nil {
			return idempotency.Response{}, err
		}
		handed = handed[:maxCompanions]
	}
	resp := batchResponse(http.StatusAccepted, b, false)
	resp.KeepUntil = keep
	with := []idempotency.Companion{h.Batches.BatchAccepted(b)}
	for _, j := range handed {
		with = append(with, h.Jobs.Promotion(j))
	}
	err := h.Idempotency.Complete(ctx, lock, resp, with...)
	if !errors.Is(err, idempotency.ErrCompanionFailed) {
		return resp, err
	}
	if err := h.promoteBatch(ctx, handed); err != nil {
		return resp, err
	}
	if err := h.restate(ctx, &b); err != nil {
		return resp, err
	}
	resp = batchResponse(http.StatusAccepted, b, false)
	resp.KeepUntil = keep
	return resp, h.Idempotency.Complete(ctx, lock, resp, h.Batches.BatchAccepted(b))
}

// restate sets every answered job of b to its state now.
func (h *Handler) restate(ctx context.Context, b *jobs.Batch) error {
	keys := make([]engine.Key, len(b.Jobs))
	for i, bj := range b.Jobs {
		keys[i] = engine.Key{Type: bj.Job.Type, JobID: answeredID(bj)}
	}
	views, err := h.Batches.Views(ctx, keys)
	if err != nil {
		return err
	}
	for i := range b.Jobs {
		b.Jobs[i].JobID, b.Jobs[i].State = views[i].ID, views[i].State
	}
	return nil
}

// answeredID is the job a batch job is: the one its answer names, else its
// own.
func answeredID(bj jobs.BatchJob) string {
	if bj.JobID != "" {
		return bj.JobID
	}
	return bj.Job.ID
}

// refusesBatch is the problem that refuses batch b as a whole before
// anything is written, or nil, each refusal named by its job's index: a job
// id that already holds another request's job (the batch's key reused after
// its answer expired: 422); a parent named by job id that the caller cannot
// see (404); a parent, named by id or the job a "#k" deduplicates onto,
// that would have more than jobs.MaxContinuations (409); a job whose
// duplicate policy its key's last job refuses (409).
func (h *Handler) refusesBatch(ctx context.Context, log *slog.Logger, b jobs.Batch) *Problem {
	unavailableP := func(err error) *Problem {
		log.Error("enqueue: batch: check", obs.KeyError, obs.Redact(err))
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "a backing service failed; retry with the same Idempotency-Key")
	}
	own := make([]string, len(b.Jobs))
	for i, bj := range b.Jobs {
		own[i] = bj.Job.ID
	}
	existing, err := h.Batches.Records(ctx, own)
	if err != nil {
		return unavailableP(err)
	}
	for i, bj := range b.Jobs {
		if j, ok := existing[bj.Job.ID]; ok && !sameJob(j, bj.Job) {
			p := newProblem(http.StatusUnprocessableEntity, ProblemKeyMismatch, fmt.Sprintf(
				"jobs[%d]: this Idempotency-Key was already used for a different batch; use a new key; no job was made", i))
			return p
		}
	}
	// Who each job's key is held by, and so what its parents are.
	holders := make([]*jobs.Job, len(b.Jobs))
	for i, bj := range b.Jobs {
		holder, found, err := h.Batches.Holder(ctx, bj.Job)
		if err != nil {
			return unavailableP(err)
		}
		if found {
			holders[i] = &holder
		}
		if found && !holder.State.Active() && !jobs.Allows(bj.Policy, holder.State) {
			p := newProblem(http.StatusConflict, ProblemDuplicate, fmt.Sprintf(
				"jobs[%d]: job %s with key %q is %s and duplicatePolicy %s rejects a new one; no job was made", i, holder.ID, holder.Key, holder.State, bj.Policy))
			p.ExistingJobID, p.Policy = holder.ID, string(bj.Policy)
			return p
		}
	}
	waiting := map[string]int{} // a parent outside the batch → the batch's jobs after it
	first := map[string]int{}   // → the first of them
	for i, bj := range b.Jobs {
		parent := bj.Job.After
		if n, ok := batchRef(parent); ok {
			if holders[n] == nil || !holders[n].State.Active() {
				continue // job n is a new job of the batch
			}
			parent = holders[n].ID // job n deduplicates onto it
		}
		if parent == "" {
			continue
		}
		if _, seen := first[parent]; !seen {
			first[parent] = i
		}
		waiting[parent]++
	}
	for parent, n := range waiting {
		i := first[parent]
		p, err := h.Jobs.Get(ctx, parent)
		if errors.Is(err, jobs.ErrNotFound) || (err == nil && p.Caller != b.Caller) {
			return newProblem(http.StatusNotFound, ProblemNotFound, fmt.Sprintf("jobs[%d].after: job %s is not found; no job was made", i, parent))
		}
		have, cerr := h.Batches.Continuations(ctx, parent)
		if err = errors.Join(err, cerr); err != nil {
			return unavailableP(err)
		}
		have = slices.DeleteFunc(have, func(id string) bool { return slices.Contains(own, id) })
		if len(have)+n > jobs.MaxContinuations {
			return newProblem(http.StatusConflict, ProblemTooManyContinuations, fmt.Sprintf(
				"jobs[%d].after: job %s would have more than %d jobs waiting for it; no job was made", i, parent, jobs.MaxContinuations))
		}
	}
	return nil
}

// sendFinisher sends the batch's finisher, FinishDelay ahead, under an id
// of its own (each try of the accept sends one; each finishes the batch if
// it still needs it).
func (h *Handler) sendFinisher(ctx context.Context, batchID, corr string) error {
	env := message.Envelope{V: message.Version, MessageID: message.NewMessageID(), Type: contract.BatchFinish.Name,
		Args: map[string]string{"batchId": batchID}, CorrelationID: corr, EnqueuedAt: h.now().UTC()}
	env.Key = contract.BatchFinish.DeriveKey(env.Args)
	body, err := env.Encode()
	if err != nil {
		return err
	}
	return h.Queue.Send(ctx, sqsQueueMessage(contract.BatchFinish, body, corr, FinishDelay))
}
