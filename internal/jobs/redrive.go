package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
)

// Lifecycle keeps a redriven job's record true: a Failed job whose dead
// letter is sent back to its queue becomes active again, so enqueue dedups
// onto it instead of admitting a second job under AllowAfterFailed.
//
// A redrive moves the record Failed → Pending (Reactivate), sends the
// message, then Pending → Enqueued (Settle with sent) or, when the send
// failed, back to Failed (Settle without). Pending is the state that tells
// the truth in between: "its message is not confirmed in the queue". If the
// redrive dies there, the record does not read Enqueued with nothing in the
// queue; it stays Pending, which keeps the key from a second job, and once the
// pending timeout has passed the next enqueue of the same key sends the
// stored message again under the same id (as for any unconfirmed enqueue),
// and so does a second run of the redrive.
//
// It has a Recorder's fields (client, table, clock) with a wider client on
// purpose: an operator's writes are not a worker's.
type Lifecycle struct {
	client DynamoAPI
	table  string
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewLifecycle returns the lifecycle operations on the jobs table.
func NewLifecycle(client DynamoAPI, table string) *Lifecycle {
	return &Lifecycle{client: client, table: table}
}

func (l *Lifecycle) now() time.Time { return ddb.Now(l.Now) }

// Revival is what a redrive needs to know of a job before it sends it again.
type Revival struct {
	JobID string `json:"jobId"`
	// Found: the job record exists and has not expired. A dead letter can
	// outlive its job's record (sent outside the API, or older than the
	// record's retention); such a job has no state to keep true, unless
	// jobs waited for it: its end decided them (as Expired, see Judge),
	// so it is Found, reads Expired and is not revived (a redrive would
	// run it after what ran as if after it).
	Found bool `json:"found"`
	// State is the stored state of the record ("" when not Found).
	State          State  `json:"state,omitempty"`
	Caller         string `json:"-"`
	Type           string `json:"type,omitempty"`
	Key            string `json:"key,omitempty"`
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// SupersededBy is the job that now holds this job's (caller, type, key)
	// in the dedup pointer, "" when the pointer is absent, expired, or
	// points at this job.
	SupersededBy string `json:"supersededBy,omitempty"`
}

// Superseded reports whether a newer job has since taken the job's key.
func (r Revival) Superseded() bool { return r.SupersededBy != "" }

// Revivable reports whether a redrive can make the job active: it is Failed,
// or already active from an earlier redrive that did not finish (Pending,
// Enqueued, Scheduled).
func (r Revival) Revivable() bool {
	switch r.State {
	case StateFailed, StatePending, StateEnqueued, StateScheduled:
		return true
	}
	return false
}

// ErrSuperseded is returned (wrapped) by Reactivate when a newer job took the
// key after Inspect read it.
var ErrSuperseded = errors.New("jobs: key taken by a newer job")

// ErrStateChanged is returned (wrapped) by Reactivate when the record is no
// longer in a state a redrive can reactivate.
var ErrStateChanged = errors.New("jobs: job state changed")

// lifecycleRecord is the part of a job record a redrive reads.
type lifecycleRecord struct {
	JobID          string `dynamodbav:"jobId"`
	Caller         string `dynamodbav:"caller"`
	Type           string `dynamodbav:"type"`
	Key            string `dynamodbav:"key"`
	State          State  `dynamodbav:"state"`
	LastErrorClass string `dynamodbav:"lastErrorClass"`
	ExpiresAt      int64  `dynamodbav:"expiresAt"`
}

// dedupPointer is the part of a dedup pointer a redrive reads.
type dedupPointer struct {
	JobID     string `dynamodbav:"jobId"`
	ExpiresAt int64  `dynamodbav:"expiresAt"`
}

// get reads one live item into out; ok is false when there is none.
func (l *Lifecycle) get(ctx context.Context, pk string, out any) (bool, error) {
	return getLive(ctx, l.client, l.table, pk, l.now(), out)
}

// Inspect reads job jobID's record and its key's dedup pointer, and writes
// nothing.
func (l *Lifecycle) Inspect(ctx context.Context, jobID string) (Revival, error) {
	rv := Revival{JobID: jobID}
	var r lifecycleRecord
	ok, err := l.get(ctx, JobPK(jobID), &r)
	if err != nil {
		return rv, err
	}
	if !ok {
		// Its continuations were (or are being) decided by its end: the
		// list outlives the letter (continuationsLife).
		var list continuationsItem
		waited, err := l.get(ctx, ContinuationsOfPK(jobID), &list)
		if waited && len(list.IDs) > 0 {
			rv.Found, rv.State = true, StateExpired
		}
		return rv, err
	}
	rv.Found, rv.State, rv.Caller, rv.Type, rv.Key, rv.LastErrorClass = true, r.State, r.Caller, r.Type, r.Key, r.LastErrorClass
	var p dedupPointer
	ok, err = l.get(ctx, DedupPK(r.Caller, r.Type, r.Key), &p)
	if err != nil {
		return rv, err
	}
	if ok && p.JobID != jobID {
		rv.SupersededBy = p.JobID
	}
	return rv, nil
}

// Reactivate makes the job rv (as Inspect read it) active again before its
// message is sent back: a Failed record becomes Pending with a fresh life
// (runAt now, failedAt removed, expiresAt as for a new record), on the
// condition that it is still Failed. Unless keepKeyOwner is set (a forced
// redrive of a superseded job), the dedup pointer is pointed at the job in
// the same transaction, on the condition that no newer job took it, and
// lives as long as the record. A record that is already active (an earlier
// redrive did not finish) is left as it is. It returns an error matching
// ErrSuperseded or ErrStateChanged when a condition failed.
func (l *Lifecycle) Reactivate(ctx context.Context, rv Revival, keepKeyOwner bool) error {
	if !rv.Found {
		return fmt.Errorf("%w: %s", ErrNotFound, rv.JobID)
	}
	if rv.State != StateFailed {
		if rv.Revivable() {
			return nil // already active: nothing to write
		}
		return fmt.Errorf("%w: %s is %s", ErrStateChanged, rv.JobID, rv.State)
	}
	now := l.now()
	exp := activeExpiry(now)
	upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StatePending)), now, OutcomeRedriven, "redriven by an operator after it was dead-lettered").
		Set(expression.Name("runAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(exp)).
		Remove(expression.Name("failedAt"))
	// Still Failed, or already made Pending by this very call (retried
	// after its response was lost: the same updatedAt).
	// Only a live record: one whose life ended since Inspect read it
	// counts as Expired to what waits for it, which may be decided now.
	live := expression.Name(AttrExpiresAt).GreaterThan(expression.Value(now.Unix()))
	rec, err := l.update(JobPK(rv.JobID), upd, existsIn(StateFailed).And(live).Or(existsIn(StatePending).
		And(expression.Name("updatedAt").Equal(expression.Value(now.UnixMilli())))))
	if err != nil {
		return err
	}
	items := []types.TransactWriteItem{{Update: rec}}
	if !keepKeyOwner {
		ptrUpd := expression.Set(expression.Name(AttrJobID), expression.Value(rv.JobID)).
			Set(expression.Name(AttrExpiresAt), expression.Value(exp))
		free := expression.AttributeNotExists(expression.Name(AttrPK)).
			Or(expression.Name(AttrExpiresAt).LessThanEqual(expression.Value(now.Unix()))).
			Or(expression.Name(AttrJobID).Equal(expression.Value(rv.JobID)))
		ptr, err := l.update(DedupPK(rv.Caller, rv.Type, rv.Key), ptrUpd, free)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Update: ptr})
	}
	_, err = l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	if !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: reactivate %s: %w", rv.JobID, err)
	}
	if _, failed := ddb.ItemAt(err, 0); failed {
		return fmt.Errorf("%w: %s is no longer Failed", ErrStateChanged, rv.JobID)
	}
	return fmt.Errorf("%w: %s", ErrSuperseded, rv.JobID)
}

// Settle ends a redrive's send: with sent, the Pending record becomes
// Enqueued; without (the send failed), Failed again with its error class
// kept. It only moves a Pending record; anything else (a job that meanwhile
// failed again, or settled by an enqueue that resumed it) is left as it is.
func (l *Lifecycle) Settle(ctx context.Context, jobID string, sent bool) error {
	now := l.now()
	upd := expression.Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli()))
	if sent {
		upd = upd.Set(expression.Name(AttrState), expression.Value(StateEnqueued))
	} else {
		upd = upd.Set(expression.Name(AttrState), expression.Value(StateFailed)).
			Set(expression.Name("failedAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name(AttrExpiresAt), expression.Value(now.Add(TerminalRetention).Unix()))
	}
	return l.updateIn(ctx, jobID, StatePending, upd, "settle")
}

// MarkDropped records on Failed job jobID that its dead letter was
// dropped: it can no longer be redriven, so what waits for it is decided
// (by the next ReleaseContinuations of it): cancelled under OnSucceeded,
// sent under OnAnyEnd. A job no longer
// Failed, or gone, is left as it is.
func (l *Lifecycle) MarkDropped(ctx context.Context, jobID string) error {
	return l.updateIn(ctx, jobID, StateFailed, expression.Set(expression.Name("letterDropped"), expression.Value(true)), "mark dropped")
}

// updateIn applies upd (what, in errors) to job jobID if it is in state s;
// a job in any other state, or gone, is left as it is, and that is no
// error.
func (l *Lifecycle) updateIn(ctx context.Context, jobID string, s State, upd expression.UpdateBuilder, what string) error {
	u, err := l.update(JobPK(jobID), upd, existsIn(s))
	if err != nil {
		return err
	}
	if _, err := l.client.UpdateItem(ctx, ddb.UpdateInput(u)); err != nil && !ddb.IsConditionFailed(err) {
		return fmt.Errorf("jobs: %s %s: %w", what, jobID, err)
	}
	return nil
}

// existsIn is the condition that the item exists in state s.
func existsIn(s State) expression.ConditionBuilder {
	return expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name(AttrState).Equal(expression.Value(s)))
}

// update builds a conditional update of the item pk.
func (l *Lifecycle) update(pk string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) (*types.Update, error) {
	u, err := ddb.Update(l.table, keyAV(pk), upd, cond, false)
	if err != nil {
		return nil, fmt.Errorf("jobs: update %s: %w", pk, err)
	}
	return u, nil
}
