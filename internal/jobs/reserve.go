package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/idempotency"
)

// maxReserveAttempts bounds the write-decide loop of Reserve under
// contention.
const maxReserveAttempts = 3

// Reserve decides what an enqueue of job under policy does, and when a new job
// is due, reserves it: one transaction writes the Pending record and points
// the dedup pointer at it, conditional on the pointer being absent (or still
// pointing at the job the decision read), so two concurrent enqueues can
// never both create a job. job must carry ID, Caller, Type, Key, Queue,
// CorrelationID, Message, CreatedAt and RunAt (CreatedAt plus the delay);
// Reserve sets its state. See Outcome for what the caller does next.
//
// A continuation (job.After set) is reserved AwaitingContinuation, and the
// same transaction lists it on its parent's record and the parent on the
// continuation sweep's list (attach): a parent that is not there for
// job's caller is ErrParentNotFound, one with MaxContinuations already is
// ErrTooManyContinuations.
//
// Cost: a new job is one transaction and no read. When the key is taken, the
// failed transaction returns the pointer that blocked it, and one
// BatchGetItem reads that job's record and marker to decide.
func (s *Store) Reserve(ctx context.Context, job Job, policy contract.DuplicatePolicy) (Decision, error) {
	job.stored, job.State = StatePending, StatePending
	if job.After != "" {
		job.stored, job.State = StateAwaitingContinuation, StateAwaitingContinuation
	}
	job.CreatedAt = job.CreatedAt.UTC().Truncate(time.Millisecond)
	job.RunAt = job.RunAt.UTC().Truncate(time.Millisecond)
	job.UpdatedAt = job.CreatedAt
	ppk := DedupPK(job.Caller, job.Type, job.Key)
	prevID := ""     // the pointer must be absent
	checked := false // strangers on the parent's list were checked
	for range maxReserveAttempts {
		err := s.reserve(ctx, job, ppk, prevID)
		if err == nil {
			return Decision{Outcome: Reserved, Job: job, Own: true}, nil
		}
		if !ddb.IsConditionFailed(err) {
			return Decision{}, err
		}
		item, ownExists := ddb.ItemAt(err, 1)
		if job.After != "" && !ownExists {
			// A parent that refused it decides only for a job that is not
			// there yet: a request whose job exists is answered by it,
			// whatever its parent's record says now.
			d, again, err := s.admission(ctx, &job, err, &checked)
			switch {
			case err != nil:
				return Decision{}, err
			case d != nil:
				return *d, nil
			case again:
				continue
			}
		}
		if ownExists {
			// This very call's transaction, applied with its response
			// lost and retried by the SDK, finds its own record: that is
			// the reservation, not a conflict with itself.
			var r record
			if ok, _ := ddb.DecodeLive(item, s.now(), &r); ok && r.State == job.stored &&
				r.CreatedAt == ms(job.CreatedAt) && r.Message == job.Message && r.Caller == job.Caller {
				return Decision{Outcome: Reserved, Job: job, Own: true}, nil
			}
			// Otherwise the request's own job exists from an earlier try
			// of this request, or an Idempotency-Key reused after its
			// record expired.
			return s.own(ctx, job)
		}
		var p pointer
		item, _ = ddb.ItemAt(err, 0)
		found, derr := ddb.DecodeLive(item, s.now(), &p)
		if derr != nil {
			return Decision{}, fmt.Errorf("jobs: %w", derr)
		}
		if item == nil { // the service did not return it: read it
			if found, err = s.getItem(ctx, ppk, &p); err != nil {
				return Decision{}, err
			}
		}
		prevID = ""
		if !found || p.JobID == job.ID {
			prevID = p.JobID
			continue
		}
		prev, ok, err := s.find(ctx, p.JobID, job.Type)
		if err != nil {
			return Decision{}, err
		}
		if ok {
			if d, decided := s.decide(prev, job, policy); decided {
				if d.Outcome == Resume {
					s.refreshPointer(ctx, d.Job)
				}
				return d, nil
			}
		}
		prevID = p.JobID
	}
	return Decision{Outcome: Busy, RetryAfter: time.Second}, nil
}

// Holder returns the job that holds job's key now, with its state (found
// is false when none does, or job itself); it writes nothing. A batch asks
// it of its jobs before it writes anything, so that what the holder
// decides (a duplicate policy that refuses the job, an active job a
// continuation would wait for instead) refuses the batch with no job made.
func (s *Store) Holder(ctx context.Context, job Job) (Job, bool, error) {
	var p pointer
	found, err := s.getItem(ctx, DedupPK(job.Caller, job.Type, job.Key), &p)
	if err != nil || !found || p.JobID == job.ID {
		return Job{}, false, err
	}
	return s.find(ctx, p.JobID, job.Type)
}

// own decides when the request's own job id already has a record.
func (s *Store) own(ctx context.Context, job Job) (Decision, error) {
	own, found, err := s.find(ctx, job.ID, job.Type)
	switch {
	case err != nil:
		return Decision{}, err
	case !found:
		return Decision{Outcome: Busy, RetryAfter: time.Second}, nil
	case own.State == StatePending:
		s.refreshPointer(ctx, own)
		return Decision{Outcome: Resume, Job: own, Own: true}, nil
	}
	return Decision{Outcome: Duplicate, Job: own, Own: true}, nil
}

func nilIfNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// decide returns the decision when the key's last job prev settles it, or
// decided=false when a new job may be reserved.
func (s *Store) decide(prev, job Job, policy contract.DuplicatePolicy) (d Decision, decided bool) {
	switch {
	case prev.State == StatePending:
		if wait := prev.UpdatedAt.Add(s.pendingTimeout()).Sub(s.now()); wait > 0 {
			return Decision{Outcome: Busy, Job: prev, RetryAfter: wait}, true
		}
		return Decision{Outcome: Resume, Job: prev}, true
	case prev.State.Active():
		return Decision{Outcome: Duplicate, Job: prev}, true
	case !Allows(policy, prev.State):
		return Decision{Outcome: Rejected, Job: prev}, true
	}
	return Decision{}, false
}

// reserve writes the Pending record and the pointer in one transaction. The
// pointer must be absent (or expired) when prevID is "", else still point at
// prevID; the record must not exist (or be expired). Both ask for the item
// that fails their condition.
func (s *Store) reserve(ctx context.Context, job Job, ppk, prevID string) error {
	items, err := s.reservation(job, ppk, prevID, s.now())
	if err != nil {
		return err
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		return fmt.Errorf("jobs: reserve %s: %w", job.ID, err)
	}
	return nil
}

// reservation is the transaction elements reserve writes for job: its
// pointer, its record, and for a continuation what attach adds.
func (s *Store) reservation(job Job, ppk, prevID string, now time.Time) ([]types.TransactWriteItem, error) {
	ptrCond := ddb.AbsentOrExpired(AttrPK, now)
	if prevID != "" {
		ptrCond = expression.Name(AttrJobID).Equal(expression.Value(prevID))
	}
	ptrExpiry := activeExpiry(job.RunAt)
	if job.stored == StateAwaitingContinuation {
		ptrExpiry = 0 // as its record: none while it waits
	}
	ptrPut, err := ddb.Put(s.table, pointer{PK: ppk, JobID: job.ID, ExpiresAt: ptrExpiry}, ptrCond, true)
	if err != nil {
		return nil, fmt.Errorf("jobs: reserve %s: %w", job.ID, err)
	}
	recPut, err := ddb.Put(s.table, toRecord(job), ddb.AbsentOrExpired(AttrPK, now), true)
	if err != nil {
		return nil, fmt.Errorf("jobs: reserve %s: %w", job.ID, err)
	}
	items := []types.TransactWriteItem{{Put: ptrPut}, {Put: recPut}}
	if job.After != "" && job.stored == StateAwaitingContinuation {
		attach, err := s.attach(job, now)
		if err != nil {
			return nil, err
		}
		items = append(items, attach...)
	}
	return items, nil
}

// ReserveRefused reserves continuation job Cancelled, with reason, without
// waiting for its parent: what a batch does with a continuation its parent
// refused once the batch was written (the parent's list filled up, or its
// record expired, in the instant since the batch's checks), so the batch
// still completes and answers every job, this one ended before it ran. A
// key another job holds answers as Reserve would (Duplicate of that job).
func (s *Store) ReserveRefused(ctx context.Context, job Job, reason string) (Decision, error) {
	now := s.now()
	job.stored, job.State = StateCancelled, StateCancelled
	job.CreatedAt = job.CreatedAt.UTC().Truncate(time.Millisecond)
	job.RunAt = job.RunAt.UTC().Truncate(time.Millisecond)
	job.UpdatedAt = job.CreatedAt
	job.LastOutcome, job.LastReason = OutcomeCancelled, cleanText(reason, 512, OutcomeCancelled)
	job.recorded = []OutcomeRecord{{At: now, Outcome: OutcomeCancelled, Reason: job.LastReason}}
	items, err := s.reservation(job, DedupPK(job.Caller, job.Type, job.Key), "", now)
	if err != nil {
		return Decision{}, err
	}
	exp := terminalExpiry(now, time.Time{})
	items[0].Put.Item[AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)}
	items[1].Put.Item[AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch {
	case err == nil:
		return Decision{Outcome: Reserved, Job: job, Own: true}, nil
	case !ddb.IsConditionFailed(err):
		return Decision{}, fmt.Errorf("jobs: reserve %s refused: %w", job.ID, err)
	}
	if _, ownExists := ddb.ItemAt(err, 1); ownExists {
		return s.own(ctx, job) // an earlier try made it
	}
	holder, found, herr := s.Holder(ctx, job)
	switch {
	case herr != nil:
		return Decision{}, herr
	case !found:
		return Decision{Outcome: Busy, RetryAfter: time.Second}, nil
	}
	return Decision{Outcome: Duplicate, Job: holder}, nil
}

// MaxReserveNew is how many jobs ReserveNew takes at once: two elements
// each, a transaction's 100.
const MaxReserveNew = 50

// ReserveNew reserves every job of js as Reserve would a new one (Pending,
// its pointer and record), in one transaction: all of them, or, when any
// key or id is taken (a condition fails), none; then ok is false and taken
// lists the indexes of the jobs whose key or id is taken, for the caller
// to reserve the others again and those one by one with Reserve, which
// decides each. The jobs must wait for no other (no After), hold distinct
// keys, and be at most MaxReserveNew. It returns the jobs as reserved. A
// batch of new jobs is a transaction, not a call per job.
func (s *Store) ReserveNew(ctx context.Context, js []Job) (reserved []Job, taken []int, err error) {
	if len(js) == 0 || len(js) > MaxReserveNew {
		return nil, nil, fmt.Errorf("jobs: ReserveNew takes 1-%d jobs, not %d", MaxReserveNew, len(js))
	}
	now := s.now()
	var items []types.TransactWriteItem
	seen := map[string]bool{}
	for _, job := range js {
		ppk := DedupPK(job.Caller, job.Type, job.Key)
		if job.After != "" || seen[ppk] {
			return nil, nil, fmt.Errorf("jobs: ReserveNew: %s waits for another job or shares its key", job.ID)
		}
		seen[ppk] = true
		job.stored, job.State = StatePending, StatePending
		job.CreatedAt = job.CreatedAt.UTC().Truncate(time.Millisecond)
		job.RunAt = job.RunAt.UTC().Truncate(time.Millisecond)
		job.UpdatedAt = job.CreatedAt
		it, err := s.reservation(job, ppk, "", now)
		if err != nil {
			return nil, nil, err
		}
		items = append(items, it...)
		reserved = append(reserved, job)
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch {
	case ddb.IsConditionFailed(err):
		for i := range js {
			_, ptr := ddb.ItemAt(err, 2*i)
			_, rec := ddb.ItemAt(err, 2*i+1)
			if ptr || rec {
				taken = append(taken, i)
			}
		}
		if len(taken) == 0 { // the service named none: decide them all one by one
			for i := range js {
				taken = append(taken, i)
			}
		}
		return nil, taken, nil
	case err != nil:
		return nil, nil, fmt.Errorf("jobs: reserve %d jobs: %w", len(js), err)
	}
	return reserved, nil, nil
}

// Promotion is the write that moves a job from Pending to its queued state
// (Enqueued, or Scheduled with a delay) once SQS accepted its message, and
// stores the message as it was handed over (a scheduled job's carries the
// trace of its hand-over as its traceparent). It is
// committed together with the request layer's completion (it implements
// idempotency.Companion), so the response and the job's state are stored as
// one.
type Promotion struct {
	s   *Store
	job Job
}

// Promotion returns the promotion of job, to commit with the request's
// completion.
func (s *Store) Promotion(job Job) idempotency.Companion { return Promotion{s: s, job: job} }

// TransactItem is the promotion as a transaction element: conditional on the
// record existing in a state the event allows (a job that already Failed,
// was parked or cancelled is not overwritten); promoting an already promoted
// job is harmless. A job sent late (a Pending job resumed after its pending
// timeout, possibly days after its runAt) gets the send time as its runAt
// and a life counted from it: the job ages from when its message entered
// the queue, not from when it was first reserved.
func (p Promotion) TransactItem() (types.TransactWriteItem, error) {
	ev := EventSent
	if p.job.Delay() > 0 {
		ev = EventSentDelayed
	}
	now := p.s.now()
	upd := expression.Set(expression.Name(AttrState), expression.Value(p.job.QueuedState())).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli()))
	if p.job.Message != "" {
		// The message as it was handed over: a scheduled job's carries the
		// trace of its hand-over (a run-now's copy sends it on).
		upd = upd.Set(expression.Name("message"), expression.Value(p.job.Message))
	}
	if late(p.job.RunAt, now, p.s.pendingTimeout()) {
		upd = upd.Set(expression.Name("runAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name(AttrExpiresAt), expression.Value(activeExpiry(now)))
	}
	cond := expression.AttributeExists(expression.Name(AttrPK)).And(inStates(Sources(ev)))
	u, err := ddb.Update(p.s.table, keyAV(JobPK(p.job.ID)), upd, cond, false)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("jobs: promote: %w", err)
	}
	return types.TransactWriteItem{Update: u}, nil
}

// Promote is the promotion on its own. A job that left the states it can be
// promoted from (Failed, parked, cancelled, or gone) is left as it is and
// returns nil: its message was sent, the record already tells a later story.
func (s *Store) Promote(ctx context.Context, job Job) error {
	it, err := Promotion{s: s, job: job}.TransactItem()
	if err != nil {
		return err
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(it.Update))
	if err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: promote %s: %w", job.ID, err)
	}
	return nil
}

// late reports whether a message sent at now for a job due at runAt is a
// resume: sent more than the pending timeout after it was due.
func late(runAt, now time.Time, pendingTimeout time.Duration) bool {
	return now.Sub(runAt) > pendingTimeout
}

// refreshPointer keeps the dedup pointer of a late-resumed job alive as long
// as the job's refreshed record (best effort, conditional on the pointer
// still naming the job): a job resumed days after it was reserved does not
// lose its key while its message is still queued.
func (s *Store) refreshPointer(ctx context.Context, job Job) {
	now := s.now()
	if !late(job.RunAt, now, s.pendingTimeout()) {
		return
	}
	u, err := ddb.Update(s.table, keyAV(DedupPK(job.Caller, job.Type, job.Key)),
		expression.Set(expression.Name(AttrExpiresAt), expression.Value(activeExpiry(now))),
		expression.Name(AttrJobID).Equal(expression.Value(job.ID)), false)
	if err != nil {
		return
	}
	// A failure leaves the pointer as it was: it still lives for the
	// record's first life, and the job's message is re-sent either way.
	_, _ = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
}

// inStates is the condition "state is one of states".
func inStates(states []State) expression.ConditionBuilder {
	ops := make([]expression.OperandBuilder, len(states))
	for i, st := range states {
		ops[i] = expression.Value(st)
	}
	return expression.Name(AttrState).In(ops[0], ops[1:]...)
}
