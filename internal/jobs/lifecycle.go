package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/lifetime"
)

// The outcomes a record's lastOutcome names.
const (
	OutcomeParked       = "parked"
	OutcomeNoop         = engine.OutcomeNoop
	OutcomeDeadLettered = "dead-lettered"
	OutcomeCancelled    = "cancelled"
	OutcomeRedriven     = "redriven"
	OutcomeClaimFailed  = "claim-failed"
	// OutcomeSkipped: the job's switch was off and its type skips while off
	// (a recurring job's tick): it succeeded without running.
	OutcomeSkipped = engine.OutcomeSkipped
)

// storedOutcome is one entry of a record's history attribute.
type storedOutcome struct {
	At      int64  `dynamodbav:"at"` // epoch milliseconds
	Outcome string `dynamodbav:"outcome"`
	Reason  string `dynamodbav:"reason,omitempty"`
}

// attrHistory is the record's list of the outcomes written to it.
const attrHistory = "history"

// withOutcome sets the record's lastOutcome and lastReason and appends the
// outcome to its history, in the one update that records it. A park is the
// exception: a job parked again and again (its switch off for days) would
// grow its record without end, so a park only sets lastOutcome; it joins
// the history when an outcome overtakes it (keepPark), or in View. The
// reason is cleaned as every reason is. A write retried after its response
// was lost can append the same entry twice; View shows it once.
func withOutcome(upd expression.UpdateBuilder, at time.Time, outcome, reason string) expression.UpdateBuilder {
	reason = cleanText(reason, 512, outcome)
	upd = upd.Set(expression.Name("lastOutcome"), expression.Value(outcome)).
		Set(expression.Name("lastReason"), expression.Value(reason))
	if outcome == OutcomeParked {
		return upd
	}
	return appendOutcome(upd, storedOutcome{At: at.UnixMilli(), Outcome: outcome, Reason: reason})
}

// appendOutcome appends o to the record's history.
func appendOutcome(upd expression.UpdateBuilder, o storedOutcome) expression.UpdateBuilder {
	return upd.Set(expression.Name(attrHistory), expression.ListAppend(
		expression.IfNotExists(expression.Name(attrHistory), expression.Value([]storedOutcome{})), expression.Value([]storedOutcome{o})))
}

// keepPark appends to the history of jobID the park that an outcome just
// overtook (old is the record before that outcome's write), so that a job
// parked, then dead-lettered or cancelled, still says it was parked. It is
// a second write only in that case; it fails softly (the history is what
// an operator reads, never what a decision is made on).
func keepPark(ctx context.Context, c UpdateAPI, table, jobID string, old record) {
	if old.LastOutcome != OutcomeParked {
		return
	}
	u, err := ddb.Update(table, keyAV(JobPK(jobID)),
		appendOutcome(expression.UpdateBuilder{}, storedOutcome{At: old.UpdatedAt, Outcome: OutcomeParked, Reason: old.LastReason}),
		expression.AttributeExists(expression.Name(AttrPK)), true)
	if err == nil {
		_, err = c.UpdateItem(ctx, ddb.UpdateInput(u))
	}
	_ = err // best effort, as documented
}

// UpdateAPI is the part of the DynamoDB client a Recorder uses: workers only
// update job records.
type UpdateAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Recorder writes what workers learn about a job onto its record: parked,
// failed, or done without work (and why). Every write is conditional on the
// state machine (Transition), so a stale worker never overwrites a terminal
// record, and a write retried after a lost response finds its own work.
type Recorder struct {
	client UpdateAPI
	table  string
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewRecorder returns the recorder on table.
func NewRecorder(client UpdateAPI, table string) *Recorder {
	return &Recorder{client: client, table: table}
}

// Failure is what MarkFailed records (engine.Failure); an Attempts of 0
// leaves the record's attempts as they are.
type Failure = engine.Failure

// MarkFailed records that job jobID failed. It is conditional and
// idempotent: it never overwrites a cancelled record, and marking an already
// Failed job again updates the class, reason and attempts. A job that does
// not exist (or whose record expired) returns an error matching ErrNotFound,
// which a dead-letter consumer may treat as done.
func (r *Recorder) MarkFailed(ctx context.Context, jobID string, f Failure) error {
	now := ddb.Now(r.Now)
	upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StateFailed)), now, OutcomeDeadLettered, cleanText(f.Reason, 512, "failed")).
		Set(expression.Name("lastErrorClass"), expression.Value(cleanText(f.Class, 64, "unknown"))).
		Set(expression.Name("failedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(terminalExpiry(now, f.Due)))
	if f.Attempts > 0 {
		upd = upd.Set(expression.Name("attempts"), expression.Value(f.Attempts))
	}
	old, err := r.update(ctx, jobID, EventFailed, upd)
	if err == nil {
		keepPark(ctx, r.client, r.table, jobID, old)
	}
	return err
}

// MarkParked records that job jobID is parked (its kill switch is off) and
// keeps it and its dedup pointer alive as long as it is parked: a parked job
// never expires into a second job. It returns the state the record had; a record
// the state machine does not let park (cancelled, failed) is left alone and
// returned with ErrConflict.
func (r *Recorder) MarkParked(ctx context.Context, jobID string) (State, error) {
	now := ddb.Now(r.Now)
	expires := activeExpiry(now)
	upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StateParked)), now, OutcomeParked, "its kill switch is off; it runs when the switch is on again").
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(expires))
	old, err := r.update(ctx, jobID, EventParked, upd)
	if err != nil {
		return old.State, err
	}
	// The pointer follows the record's life. Once a day is enough: it is
	// written on the first park and when the record's life was extended by
	// more than a day since. A retry that found this very call's write (its
	// response lost: the same updatedAt) cannot tell, so it writes it too.
	own := old.UpdatedAt == now.UnixMilli()
	if old.State == StateParked && !own && old.ExpiresAt > expires-int64((24*time.Hour).Seconds()) {
		return old.State, nil
	}
	ptr, err := ddb.Update(r.table, keyAV(DedupPK(old.Caller, old.Type, old.Key)),
		expression.Set(expression.Name(AttrExpiresAt), expression.Value(expires)),
		expression.Name(AttrJobID).Equal(expression.Value(jobID)), false)
	if err != nil {
		return old.State, fmt.Errorf("jobs: park %s: %w", jobID, err)
	}
	if _, err := r.client.UpdateItem(ctx, ddb.UpdateInput(ptr)); err != nil && !ddb.IsConditionFailed(err) {
		return old.State, fmt.Errorf("jobs: park %s: pointer: %w", jobID, err)
	}
	return old.State, nil
}

// MarkUnclaimed records that job jobID's effect ran but its marker could
// not be claimed (ClaimFailed): the record says Succeeded, with the reason,
// so the job reads done rather than queued or Processing, and never Failed.
// A cancelled or failed record is left alone (ErrConflict).
func (r *Recorder) MarkUnclaimed(ctx context.Context, jobID, reason string) error {
	now := ddb.Now(r.Now)
	upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StateSucceeded)), now, OutcomeClaimFailed, reason).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(now.Add(TerminalRetention).Unix()))
	old, err := r.update(ctx, jobID, EventUnclaimed, upd)
	if err == nil {
		keepPark(ctx, r.client, r.table, jobID, old)
	}
	return err
}

// RecordOutcome records the last outcome of job jobID and its reason (e.g.
// OutcomeNoop, "no mail needed: user not found"), without changing its
// state. A job without a record returns an error matching ErrNotFound.
func (r *Recorder) RecordOutcome(ctx context.Context, jobID, outcome, reason string) error {
	now := ddb.Now(r.Now)
	upd := withOutcome(expression.Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())), now, outcome, reason)
	old, err := r.update(ctx, jobID, "", upd)
	if err == nil && outcome != OutcomeParked {
		keepPark(ctx, r.client, r.table, jobID, old)
	}
	return err
}

// update applies upd to the live record of jobID when the state machine
// allows ev in its stored state (any state when ev is ""), and returns the
// record as it was. A record in a state that does not allow ev is returned
// with ErrConflict; no record, with ErrNotFound.
func (r *Recorder) update(ctx context.Context, jobID string, ev Event, upd expression.UpdateBuilder) (record, error) {
	now := ddb.Now(r.Now)
	cond := expression.AttributeExists(expression.Name(AttrPK)).
		And(expression.Name(AttrExpiresAt).GreaterThan(expression.Value(now.Unix())))
	if ev != "" {
		cond = cond.And(inStates(Sources(ev)))
	}
	u, err := ddb.Update(r.table, keyAV(JobPK(jobID)), upd, cond, true)
	if err != nil {
		return record{}, fmt.Errorf("jobs: %s %s: %w", ev, jobID, err)
	}
	in := ddb.UpdateInput(u)
	in.ReturnValues = types.ReturnValueAllOld
	out, err := r.client.UpdateItem(ctx, in)
	if err == nil {
		var old record
		_, derr := ddb.DecodeLive(out.Attributes, now, &old)
		return old, derr
	}
	if !ddb.IsConditionFailed(err) {
		return record{}, fmt.Errorf("jobs: %s %s: %w", ev, jobID, err)
	}
	var old record
	ok, derr := ddb.DecodeLive(ddb.OldItem(err), now, &old)
	switch {
	case derr != nil:
		return record{}, fmt.Errorf("jobs: %w", derr)
	case !ok:
		return record{}, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	return old, fmt.Errorf("%w: %s is %s", ErrConflict, jobID, old.State)
}

// Cancel cancels the job jobID of caller if it has not run: it writes the
// tombstone marker that every worker's peek sees (so the job never runs,
// even if its message is delivered later), marks the record Cancelled, and
// then deletes its one-time schedule when it has one (Schedules). In that
// order a failure part-way never leaves a job that reads Scheduled with no
// schedule behind it: a schedule that cannot be deleted fails the cancel of
// a job that is already cancelled (its schedule would fire one message its
// workers drop), and the retry deletes it.
// It returns the job with its state: Cancelled (also when it already was),
// or, with ErrConflict, the state that forbids it (Succeeded, Failed,
// Expired, or Processing while a worker runs it). Another caller's job, or
// none, is ErrNotFound; caller "" is an operator, who may cancel anyone's.
func (s *Store) Cancel(ctx context.Context, jobID, caller string) (Job, error) {
	if s.markers == nil {
		return Job{}, errors.New("jobs: cancel needs the markers")
	}
	rec, m, has, err := s.read(ctx, jobID)
	if err != nil {
		return Job{}, err
	}
	j := s.view(rec, m, has)
	switch {
	case caller != "" && j.Caller != caller:
		return Job{}, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	case j.State == StateCancelled:
		// A cancel whose record's write failed after its tombstone, or
		// whose schedule could not be deleted, is finished here: the
		// record says Cancelled (a waiting continuation must never read
		// AwaitingContinuation under a tombstone that expires before its
		// parent ends), and the job stays on the sweep's list (an enqueue
		// that raced the first cancel may still make its schedule); the
		// sweep takes it off.
		if rec.stored.Active() {
			if _, _, err := s.recordCancel(ctx, jobID, rec, Sources(EventCancelled)...); err != nil {
				return Job{}, err
			}
		}
		if _, err := s.dropSchedule(ctx, rec, true); err != nil {
			return Job{}, fmt.Errorf("jobs: cancel %s: cancelled, but its schedule: %w", jobID, err)
		}
		return j, nil
	case j.State.Terminal() || j.State == StateProcessing:
		return j, fmt.Errorf("%w: %s is %s", ErrConflict, jobID, j.State)
	case rec.stored == StateAwaitingContinuation:
		return s.cancelWaiting(ctx, jobID, caller, rec)
	}
	tomb, err := s.markers.Tombstone(ctx, j.MarkerKey(), lifetime.Guard(rec.Due()))
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrProcessed):
			j.State = StateSucceeded
		case errors.Is(err, engine.ErrFailed):
			j.State = StateFailed
		case errors.Is(err, engine.ErrLeaseHeld):
			j.State = StateProcessing
		default:
			return Job{}, fmt.Errorf("jobs: cancel %s: %w", jobID, err)
		}
		return j, fmt.Errorf("%w: %s is %s", ErrConflict, jobID, j.State)
	}
	// The tombstone decides; the record follows so lists and policies see
	// it. A record that moved on meanwhile (it failed) keeps its story: the
	// tombstone still reads Cancelled.
	now, moved, err := s.recordCancel(ctx, jobID, rec, Sources(EventCancelled)...)
	if err != nil {
		return Job{}, err
	}
	// Last, the job's one-time schedule, if it has one: it could only send
	// a message the tombstone drops. A job still Pending is being enqueued
	// right now, and its enqueue may make the schedule after this delete:
	// it stays on the sweep's list (and that enqueue deletes what it made).
	if _, err := s.dropSchedule(ctx, rec, j.State == StatePending); err != nil {
		return Job{}, fmt.Errorf("jobs: cancel %s: cancelled, but its schedule: %w", jobID, err)
	}
	if moved {
		// The record moved on meanwhile: answer with what it says now.
		return s.Get(ctx, jobID)
	}
	// The answer is the record as written, through the one View every read
	// uses: the same attempts, reason and times a GET right after shows.
	rec.stored, rec.LastOutcome, rec.LastReason, rec.UpdatedAt = StateCancelled, OutcomeCancelled, "cancelled by its caller", time.UnixMilli(now.UnixMilli())
	return s.view(rec, tomb, true), nil
}

// cancelWaiting cancels a continuation that waits for its parent (rec,
// stored AwaitingContinuation). It has no message out: its record is what
// every release reads, so the record is written first, and a cancel cut
// short after it leaves a job that reads Cancelled and is never sent (the
// tombstone first would read Cancelled too, for the tombstone's life only,
// and a parent that ends later would send it). The tombstone follows for
// the one release that read the job waiting just before. A release that
// moved the job first (it is being sent) leaves it to an ordinary cancel.
func (s *Store) cancelWaiting(ctx context.Context, jobID, caller string, rec Job) (Job, error) {
	// Only while it still waits: once a release moved it (Pending) its
	// message may be out, and only the tombstone, written first, stops it
	// without ever calling Cancelled a job that ran.
	now, moved, err := s.recordCancel(ctx, jobID, rec, StateAwaitingContinuation)
	switch {
	case err != nil:
		return Job{}, err
	case moved:
		return s.Cancel(ctx, jobID, caller)
	}
	tomb, err := s.markers.Tombstone(ctx, rec.MarkerKey(), lifetime.Guard(rec.Due()))
	if err != nil && !errors.Is(err, engine.ErrCancelled) {
		return Job{}, fmt.Errorf("jobs: cancel %s: cancelled, but its tombstone: %w", jobID, err)
	}
	rec.stored, rec.LastOutcome, rec.LastReason, rec.UpdatedAt = StateCancelled, OutcomeCancelled, "cancelled by its caller", time.UnixMilli(now.UnixMilli())
	return s.view(rec, tomb, true), nil
}

// recordCancel writes the record of job jobID (as read: rec) Cancelled if
// it is in one of the states from (a cancel's: Sources(EventCancelled));
// moved reports that the record had left them meanwhile (it failed, or a
// release moved a waiting continuation). It keeps a park the cancel overtook in the
// history and takes a waiting continuation off its parent's list.
func (s *Store) recordCancel(ctx context.Context, jobID string, rec Job, from ...State) (now time.Time, moved bool, err error) {
	now = s.now()
	tok := newWriteToken()
	upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StateCancelled)), now, OutcomeCancelled, "cancelled by its caller").
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(terminalExpiry(now, rec.Due())))
	u, err := ddb.Update(s.table, keyAV(JobPK(jobID)), tok.set(upd), inStates(from), true)
	if err != nil {
		return now, false, fmt.Errorf("jobs: cancel %s: %w", jobID, err)
	}
	in := ddb.UpdateInput(u)
	in.ReturnValues = types.ReturnValueAllOld
	out, err := s.client.UpdateItem(ctx, in)
	switch {
	case ddb.IsConditionFailed(err) && tok.ownsFailure(err):
		// This very write, applied with its response lost and retried:
		// the record was in one of from, as the cancel read it (rec).
		if rec.stored == StateAwaitingContinuation {
			s.detach(ctx, rec)
		}
		return now, false, nil
	case ddb.IsConditionFailed(err):
		return now, true, nil
	case err != nil:
		return now, false, fmt.Errorf("jobs: cancel %s: %w", jobID, err)
	}
	var old record
	if _, derr := ddb.DecodeLive(out.Attributes, now, &old); derr == nil {
		keepPark(ctx, s.client, s.table, jobID, old)
		if old.State == StateAwaitingContinuation {
			s.detach(ctx, rec)
		}
	}
	return now, false, nil
}

// cleanText keeps a stored, shown text short and printable (an error class,
// a reason); def stands in for an empty one.
func cleanText(s string, limit int, def string) string {
	s = strings.Map(func(r rune) rune {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > limit {
		s = s[:limit]
	}
	if s == "" {
		return def
	}
	return s
}
