package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/lifetime"
)

// A continuation is a job enqueued with "after": it waits,
// AwaitingContinuation, for its parent to end, and is then released (sent,
// exactly once) or cancelled, as its afterPolicy says. Its reservation
// lists it on its parent's record (attach); whatever sees the parent end
// then calls ReleaseContinuations: the enqueue itself when the parent had already ended,
// the chain function for every settled marker on the markers table's
// stream, and the continuation sweep for the ends no marker shows (a
// parent that expired, or whose dead letter was dropped) and for a release
// cut short by a crash.

// MaxContinuations is how many continuations may wait for one job.
const MaxContinuations = 100

// ContinuationsPK is the key of the continuation sweep's list item of
// release 4: the ids of the jobs that had, or might have had, continuations
// still waiting. Nothing adds to it any more: a reservation lists the
// parent's own continuations item in the index sweep (attach), in its own
// transaction, and the sweep (or the chain function, after a release)
// takes it off once nothing waits for it. The sweep moves what a deployed
// stack's item still holds to the index (adoptLegacy).
const ContinuationsPK = "sweep#continuations"

// attrContinuations is the string set of a parent's continuations, on its
// continuations item.
const attrContinuations = "continuations"

// ContinuationsOfPK is the key of the item that lists the continuations of
// job parentID. It is an item of its own, not part of the parent's record,
// so the list lives as long as a continuation waits (whatever the
// parent's record's own life) and a parent's own writes never touch it.
func ContinuationsOfPK(parentID string) string { return "continuations#" + parentID }

// ErrParentNotFound is returned (wrapped) by Reserve for a continuation
// whose parent does not exist (or expired) or is another caller's job. An
// outbox child is never refused so: it waits for a parent not there yet,
// and is reserved Cancelled after another caller's (see admission).
var ErrParentNotFound = errors.New("jobs: the job it waits for is not found")

// ErrTooManyContinuations is returned (wrapped) by Reserve for a
// continuation whose parent already has MaxContinuations.
var ErrTooManyContinuations = fmt.Errorf("jobs: the job it waits for already has %d continuations", MaxContinuations)

// attrVersion counts the continuations a parent's list was given: the
// sweep takes a parent off its list only while the list is the one it
// released.
const attrVersion = "version"

// continuationsItem is a parent's continuations item as stored.
type continuationsItem struct {
	IDs       []string `dynamodbav:"continuations,stringset"`
	Unchecked []string `dynamodbav:"unchecked,stringset"`
	Version   int64    `dynamodbav:"version"`
	ExpiresAt int64    `dynamodbav:"expiresAt"`
}

// Verdict is what a continuation's parent's end means for it.
type Verdict int

// The verdicts.
const (
	// Wait: the parent has not ended, or Failed and may still be
	// redriven (under either policy).
	Wait Verdict = iota
	// Run: the parent ended as the policy runs it.
	Run
	// Cancel: the parent ended in a way the policy refuses.
	Cancel
)

// Judge is the verdict for a continuation under policy of parent p (as
// View derives it). A Failed parent may still be redriven while its letter
// was not dropped and its record lives (TerminalRetention after it
// failed, at least; a record that is gone reads Expired): a redrive then
// runs it again, so what waits for it waits, under OnAnyEnd too (a Failed
// job that may still run has not finished, as Hangfire's "any finished
// state" does not count Failed). Once its record is gone a redrive of its
// letter finds its continuations decided and is refused
// (Lifecycle.Inspect), so no continuation ever runs before its parent's
// redrive.
func Judge(policy contract.AfterPolicy, p Job) Verdict {
	switch {
	case !p.State.Terminal():
		return Wait
	case p.State == StateFailed && !p.LetterDropped:
		// A Failed parent may still be redriven. One whose marker says
		// FAILED before its record does (the dlq function writes the
		// marker first) is judged again later, as it is.
		return Wait
	case policy == contract.OnAnyEnd, p.State == StateSucceeded:
		return Run
	}
	return Cancel
}

// ReleaseReport is what one ReleaseContinuations did.
type ReleaseReport struct {
	// State is the parent's state.
	State State
	// Version is the version of the parent's list this release read (0:
	// it has none).
	Version int64
	// Sent, Cancelled and Waiting name the continuations this release sent,
	// cancelled, and left waiting (their parent has not ended, or a
	// Failed one may be redriven, or another release is sending them).
	Sent, Cancelled, Waiting []string
	// Failed names those of Waiting whose release failed (the error says
	// why): its write, or its send (it is then Pending, marked, and the
	// next release, or a retry of the request that made it, sends it).
	Failed []string
}

// Decided reports whether this release decided (or tried to decide)
// continuation id: it is in Sent, Cancelled or Waiting.
func (r ReleaseReport) Decided(id string) bool {
	return slices.Contains(r.Sent, id) || slices.Contains(r.Cancelled, id) || slices.Contains(r.Waiting, id)
}

// ReleaseContinuations decides the continuations of job parentID: once the parent has
// ended, each one that still awaits it is sent (with send, then promoted as
// a new job is) or cancelled with a reason naming the parent, as its
// afterPolicy judges the end (Judge); one of another caller than the
// parent's is cancelled with that reason, ended or not (settleStrangers,
// and a check of each one's caller). The one write that moves a
// continuation out of AwaitingContinuation is conditional on that state,
// so however often and however concurrently a parent's end is released, a
// continuation is sent by one release only. A continuation whose release
// stopped after that write and before its message was promoted (a crash,
// a failed send) is sent again by a later release once the pending timeout
// has passed, under the same id: its marker makes the two one run. A
// parent without continuations costs one read (GetItem of its
// continuations item); one with, two more (its record and its marker), and
// a BatchGetItem of the continuations once it has ended.
func (s *Store) ReleaseContinuations(ctx context.Context, parentID string, send SendFunc) (ReleaseReport, error) {
	var list continuationsItem
	ok, err := s.getItem(ctx, ContinuationsOfPK(parentID), &list)
	switch {
	case err != nil:
		return ReleaseReport{}, err
	case !ok || len(list.IDs) == 0:
		return ReleaseReport{Version: list.Version}, nil
	}
	ids := slices.Sorted(slices.Values(list.IDs))
	parent, err := s.parentEnd(ctx, parentID)
	if err != nil {
		return ReleaseReport{}, err
	}
	rep := ReleaseReport{State: parent.State, Version: list.Version}
	var errs []error
	if len(list.Unchecked) > 0 && parent.Type != "" {
		// Admitted before the parent existed: each of another caller is
		// cancelled now, whether the parent has ended or not.
		cancelled, err := s.settleStrangers(ctx, parent, list.Unchecked)
		errs = append(errs, err)
		rep.Cancelled, ids = cancelled, without(ids, cancelled)
	}
	if !parent.State.Terminal() {
		rep.Waiting = ids
		return rep, errors.Join(errs...)
	}
	children, err := s.records(ctx, ids)
	if err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("jobs: release %s: %w", parentID, err))...)
	}
	for _, id := range ids {
		c, ok := children[id]
		if !ok || c.After != parentID {
			continue
		}
		done, err := s.releaseOne(ctx, parent, c, send)
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case done == Run: // sent, its promotion perhaps not written (err)
			rep.Sent = append(rep.Sent, id)
		case done == Cancel:
			rep.Cancelled = append(rep.Cancelled, id)
		case err != nil:
			rep.Failed = append(rep.Failed, id)
			rep.Waiting = append(rep.Waiting, id)
		case c.stored == StateAwaitingContinuation || c.stored == StatePending:
			rep.Waiting = append(rep.Waiting, id)
		}
	}
	return rep, errors.Join(errs...)
}

// parentEnd reads the parent of a continuation with its derived state. A
// parent whose record is gone (it ended long ago, or expired) reads
// Expired: it did not succeed as far as anything can still tell. Such a
// stand-in has no Type (see parentGone).
func (s *Store) parentEnd(ctx context.Context, parentID string) (Job, error) {
	rec, m, has, err := s.read(ctx, parentID)
	switch {
	case errors.Is(err, ErrNotFound):
		return Job{ID: parentID, State: StateExpired, stored: StateExpired}, nil
	case err != nil:
		return Job{}, fmt.Errorf("jobs: release %s: %w", parentID, err)
	}
	return s.view(rec, m, has), nil
}

// releaseOne decides continuation c of ended parent: it returns Run when
// this call sent it, Cancel when this call cancelled it, and Wait when it
// did neither (it waits, or was decided before, or another release is
// sending it).
func (s *Store) releaseOne(ctx context.Context, parent, c Job, send SendFunc) (Verdict, error) {
	now := s.now()
	switch {
	case c.stored == StatePending && !c.ReleasedAt.IsZero():
		// Released, its message not yet promoted: another release is
		// sending it, or one stopped part-way and left it to this one (at
		// once when its send failed, else after the pending timeout).
		if now.Sub(c.UpdatedAt) <= s.pendingTimeout() && !c.sendFailed {
			return Wait, nil
		}
		return s.sendReleased(ctx, c, send)
	case c.stored != StateAwaitingContinuation:
		return Wait, nil
	case parent.Type != "" && c.Caller != parent.Caller:
		// Another caller's job is no parent of it, whatever its end.
		if moved, err := s.cancelAwaiting(ctx, c, strangerReason(parent.ID)); err != nil || moved {
			return Wait, err
		}
		s.detach(ctx, c)
		return Cancel, nil
	case parent.Type == "" && parentMayFollow(c) && now.Sub(c.CreatedAt) < lifetime.RelayDecision:
		// An outbox child whose parent's item is not relayed yet: it waits
		// as long as that item can still be relayed.
		return Wait, nil
	}
	verdict := Judge(c.AfterPolicy, parent)
	if killpoint.Mutated(killpoint.ContinuationUnguarded) {
		return s.sendReleased(ctx, c, send) // the chaos build's mutation: no verdict, no guard
	}
	switch verdict {
	case Run:
		c.stored, c.State, c.ReleasedAt, c.RunAt, c.UpdatedAt = StatePending, StatePending, now, now, now
		upd := expression.Set(expression.Name(AttrState), expression.Value(StatePending)).
			Set(expression.Name("releasedAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name("runAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
			Set(expression.Name(AttrExpiresAt), expression.Value(activeExpiry(now)))
		if moved, err := s.moveAwaiting(ctx, c.ID, upd); err != nil || moved {
			return Wait, err
		}
		s.settlePointer(ctx, c, activeExpiry(now))
		return s.sendReleased(ctx, c, send)
	case Cancel:
		reason := fmt.Sprintf("the job it waits for, %s, ended %s", parent.ID, parent.State)
		if parent.State == StateFailed {
			reason += " and can no longer be redriven"
		}
		if moved, err := s.cancelAwaiting(ctx, c, reason); err != nil || moved {
			return Wait, err
		}
		return Cancel, nil
	}
	return Wait, nil
}

// cancelAwaiting cancels continuation c, still awaiting its parent, with
// reason (moveAwaiting: moved reports that it no longer awaited), and
// gives its pointer the cancelled job's life.
func (s *Store) cancelAwaiting(ctx context.Context, c Job, reason string) (moved bool, err error) {
	now := s.now()
	upd := withOutcome(expression.Set(expression.Name(AttrState), expression.Value(StateCancelled)), now, OutcomeCancelled, reason).
		Set(expression.Name("updatedAt"), expression.Value(now.UnixMilli())).
		Set(expression.Name(AttrExpiresAt), expression.Value(terminalExpiry(now, time.Time{})))
	if moved, err := s.moveAwaiting(ctx, c.ID, upd); err != nil || moved {
		return moved, err
	}
	s.settlePointer(ctx, c, terminalExpiry(now, time.Time{}))
	return false, nil
}

// moveAwaiting writes upd to continuation id on condition that it still
// awaits its parent; moved reports that it no longer did (another release
// or a cancel got there first), which is not an error. The write carries
// its own token: applied with its response lost and retried by the SDK,
// it finds its own write, not another's, and has moved it (moved false).
func (s *Store) moveAwaiting(ctx context.Context, id string, upd expression.UpdateBuilder) (moved bool, err error) {
	tok := newWriteToken()
	u, err := ddb.Update(s.table, keyAV(JobPK(id)), tok.set(upd), existsIn(StateAwaitingContinuation), true)
	if err != nil {
		return false, fmt.Errorf("jobs: release %s: %w", id, err)
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	if ddb.IsConditionFailed(err) && tok.ownsFailure(err) {
		return false, nil
	}
	return conditionFailed(err, "release "+id)
}

// conditionFailed sorts the error of a conditional write (what, in
// errors): a failed condition, the item having moved on, is (true, nil);
// any other error is returned.
func conditionFailed(err error, what string) (bool, error) {
	switch {
	case ddb.IsConditionFailed(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("jobs: %s: %w", what, err)
	}
	return false, nil
}

// sendReleased sends a released continuation's message and promotes it.
// A send that fails leaves it Pending for a later release (after the
// pending timeout) to send again.
func (s *Store) sendReleased(ctx context.Context, c Job, send SendFunc) (Verdict, error) {
	c.RunAt = s.now()
	if err := send(ctx, c); err != nil {
		s.sendFailed(ctx, c)
		return Wait, fmt.Errorf("jobs: release %s: send: %w", c.ID, err)
	}
	if err := s.Promote(ctx, c); err != nil {
		// Sent: a later release sends it again under the same id, which its
		// marker makes one run.
		return Run, err
	}
	return Run, nil
}

// sendFailed records on released continuation c (Pending, as this release
// left it) that its send failed, so that the next release (the stream's
// retry of the parent's end) sends it at once rather than after the
// pending timeout, when only the continuation sweep would. Best effort: a
// record written since (promoted, or released again) is left as it is.
func (s *Store) sendFailed(ctx context.Context, c Job) {
	err := s.updateItem(ctx, JobPK(c.ID), expression.Set(expression.Name("sendFailedAt"), expression.Value(s.now().UnixMilli())),
		existsIn(StatePending).And(expression.Name("updatedAt").Equal(expression.Value(ms(c.UpdatedAt)))))
	_ = err // best effort, as documented: the pending timeout still ends the wait
}

// detach takes continuation c, cancelled while it waited, off its parent's
// list, so it no longer counts against MaxContinuations, and gives its
// pointer a TTL. Best effort: a cancelled continuation left listed is only
// counted.
func (s *Store) detach(ctx context.Context, c Job) {
	if c.After == "" {
		return
	}
	err := s.updateItem(ctx, ContinuationsOfPK(c.After),
		expression.Delete(expression.Name(attrContinuations), expression.Value(&types.AttributeValueMemberSS{Value: []string{c.ID}})),
		expression.AttributeExists(expression.Name(AttrPK)))
	_ = err // best effort, as documented
	s.settlePointer(ctx, c, terminalExpiry(s.now(), time.Time{}))
}

// settlePointer gives the dedup pointer of continuation c, which had no TTL
// while c waited, the life exp of what c became (best effort, and only
// while it still names c: a failure leaves a pointer to an ended job,
// which decides nothing wrong, only lives on).
func (s *Store) settlePointer(ctx context.Context, c Job, exp int64) {
	err := s.updateItem(ctx, DedupPK(c.Caller, c.Type, c.Key),
		expression.Set(expression.Name(AttrExpiresAt), expression.Value(exp)),
		expression.Name(AttrJobID).Equal(expression.Value(c.ID)))
	_ = err // best effort, as documented
}

// parentMayFollow reports whether continuation job may be reserved before
// its parent exists: a job of the outbox relay (caller outbox:<producer>),
// whose parent's item may be relayed after its own. It then waits as long
// as that item can be relayed (lifetime.RelayDecision) and is cancelled as
// its policy says of a parent that never came.
func parentMayFollow(job Job) bool { return strings.HasPrefix(job.Caller, contract.OutboxCallerPrefix) }
