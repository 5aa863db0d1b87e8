package deadletter

import (
	"context"
	"errors"
	"fmt"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// ErrNotRedrivable is returned (wrapped) for a dead letter that cannot go
// back to a work queue: its body is neither an envelope nor a tick, names no
// registered type, or is only part of the message's (BodyTruncated). It
// stays in the table for a person to read.
var ErrNotRedrivable = errors.New("deadletter: not redrivable")

// Sender sends job messages to the work queues; *sqsqueue.Sender is one.
type Sender interface {
	Send(ctx context.Context, m sqsqueue.Message) error
}

// RedriveStore is what the redriver needs of the table (*Store is one).
type RedriveStore interface {
	Get(ctx context.Context, id string) (Record, error)
	Select(ctx context.Context, f Filter) ([]Record, error)
	MarkRedriven(ctx context.Context, id string) error
	MarkDropped(ctx context.Context, id string) error
}

// JobLifecycle keeps a redriven job's record true (*jobs.Lifecycle is one):
// it reads whether the job may be revived, makes it active again before its
// message is sent, and settles it once the send succeeded or failed.
type JobLifecycle interface {
	Inspect(ctx context.Context, jobID string) (jobs.Revival, error)
	Reactivate(ctx context.Context, rv jobs.Revival, keepKeyOwner bool) error
	Settle(ctx context.Context, jobID string, sent bool) error
	MarkDropped(ctx context.Context, jobID string) error
}

// FailedMarkers clears the marker of a claim-then-effect job whose effect
// failed after its claim, so a redrive runs the effect again
// (*dynamostore.Store is one).
type FailedMarkers interface {
	ResetFailed(ctx context.Context, k engine.Key) error
}

// Redriver sends stored envelopes back to their type's queue under the same
// messageId, and keeps their jobs' records true. Sending again is safe
// whatever happened before: a job that already succeeded is absorbed by its
// effect marker.
type Redriver struct {
	store    RedriveStore
	sender   Sender
	registry *message.Registry
	// Jobs makes a redriven job active again and finds superseded letters.
	// Without it the job record is left as it is (Failed), which lets
	// AllowAfterFailed admit a second job: only tests that are about the queue
	// leave it nil.
	Jobs JobLifecycle
	// Markers resets a FAILED marker before the re-send (nil: none is).
	Markers FailedMarkers
}

// NewRedriver returns a redriver over store that sends with sender,
// knowing the job types of registry. Set Jobs and Markers before use.
func NewRedriver(store RedriveStore, sender Sender, registry *message.Registry) *Redriver {
	return &Redriver{store: store, sender: sender, registry: registry}
}

// Options change what Redrive and Drop do.
type Options struct {
	// DryRun reads and reports, and writes and sends nothing.
	DryRun bool
	// Force redrives a letter whose key a newer job has taken (the newer
	// job keeps the key).
	Force bool
}

// Outcome is what became of one letter.
type Outcome string

// The outcomes.
const (
	Redrove      Outcome = "redriven"
	WouldRedrive Outcome = "would-redrive" // dry run
	Dropped      Outcome = "dropped"
	WouldDrop    Outcome = "would-drop" // dry run
	Superseded   Outcome = "superseded" // left alone: a newer job holds the key
	Skipped      Outcome = "skipped"    // nothing to do; see Skipped
	Failed       Outcome = "failed"     // see Err
)

// Redriven is the outcome of redriving (or dropping) one dead letter.
type Redriven struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Queue   message.Queue `json:"queue,omitempty"`
	Outcome Outcome       `json:"outcome"`
	// Skipped says why nothing was done ("" otherwise).
	Skipped string `json:"skipped,omitempty"`
	// SupersededBy is the newer job that holds the letter's key.
	SupersededBy string `json:"supersededBy,omitempty"`
	// JobState is the job record's stored state before the redrive ("" when
	// there is no record).
	JobState jobs.State `json:"jobState,omitempty"`
	// Err is why the redrive failed (batch runs only; Redrive returns it).
	Err error `json:"-"`
	// Error is Err's text, for JSON.
	Error string `json:"error,omitempty"`
}

func (r *Redriven) fail(err error) {
	r.Outcome, r.Err = Failed, err
	if err != nil {
		r.Error = err.Error()
	}
}

// Redrive sends the dead letter id back to its type's queue: see RedriveRecord.
// It returns an error matching ErrNotFound when there is no such letter.
func (r *Redriver) Redrive(ctx context.Context, id string) (Redriven, error) {
	return r.RedriveWith(ctx, id, Options{})
}

// RedriveWith is Redrive with options.
func (r *Redriver) RedriveWith(ctx context.Context, id string, opts Options) (Redriven, error) {
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return Redriven{ID: id, Outcome: Failed}, err
	}
	return r.RedriveRecord(ctx, rec, opts)
}

// RedriveAll redrives every letter in status dead. Letters that cannot be
// redriven are reported in their Redriven.Err and do not stop the others; the
// error is only for a failure to list.
func (r *Redriver) RedriveAll(ctx context.Context) ([]Redriven, error) {
	recs, err := r.store.Select(ctx, Filter{Status: StatusDead})
	if err != nil {
		return nil, err
	}
	out := make([]Redriven, 0, len(recs))
	for _, rec := range recs {
		res, err := r.RedriveRecord(ctx, rec, Options{})
		if err != nil {
			res.fail(err)
		}
		out = append(out, res)
	}
	return out, nil
}

// RedriveRecord sends rec's envelope back to its type's queue with the same
// body (so the same messageId), the type and correlationId attributes and
// the letter's AWSTraceHeader (the job's trace), and makes its job active
// again. A recurring schedule's tick goes back as the
// same tick, to its type's queue (the worker derives the same job from it),
// whatever delivered it to the DLQ (EventBridge Scheduler, or the redrive
// policy). A letter whose job already succeeded is
// skipped; one whose key a newer job has taken is left alone (Superseded)
// unless opts.Force. It returns an error matching ErrNotRedrivable when there
// is nothing it can send.
//
// The order, and what a crash at each point leaves (a second run of the
// redrive repairs every case, and a message sent twice is absorbed by the
// effect marker):
//  1. read the job (no write): superseded or not revivable → stop here;
//  2. reset a FAILED marker (else the re-sent job would be skipped as
//     settled): a crash after it leaves a Failed job with no message, true;
//  3. the job record Failed → Pending, and the key pointed at the job again: a
//     crash after it leaves Pending with no message, which keeps a second job out and
//     says the send is unconfirmed; the next enqueue of the key after the
//     pending timeout re-sends the stored message under the same id;
//  4. send: if it fails, Pending → Failed again (the record never claims a
//     message that is not in the queue);
//  5. Pending → Enqueued; 6. the letter is marked redriven.
func (r *Redriver) RedriveRecord(ctx context.Context, rec Record, opts Options) (Redriven, error) {
	out := Redriven{ID: rec.ID, Type: rec.Type}
	switch rec.Status {
	case StatusSucceeded:
		return out.skip("already succeeded"), nil
	case StatusDropped:
		return out.skip("dropped"), nil
	}
	env, t, err := r.letterJob(rec)
	if err != nil {
		return out, err
	}
	out.Type, out.Queue = t.Name, t.Queue
	rv, stop, err := r.inspect(ctx, env.MessageID, opts, &out)
	if err != nil || stop {
		return out, err
	}
	if opts.DryRun {
		out.Outcome = WouldRedrive
		return out, nil
	}
	if r.Markers != nil {
		if err := r.Markers.ResetFailed(ctx, engine.Key{Type: env.Type, JobID: env.MessageID}); err != nil {
			return out, fmt.Errorf("deadletter: redrive %s: %w", rec.ID, err)
		}
	}
	if rv.Found {
		err := r.Jobs.Reactivate(ctx, rv, rv.Superseded())
		if errors.Is(err, jobs.ErrSuperseded) && opts.Force {
			err = r.Jobs.Reactivate(ctx, rv, true)
		}
		if errors.Is(err, jobs.ErrSuperseded) { // a newer job took the key just now
			return r.recheck(ctx, env.MessageID, out)
		}
		if err != nil {
			return out, fmt.Errorf("deadletter: redrive %s: %w", rec.ID, err)
		}
	}
	err = r.sender.Send(ctx, sqsqueue.Message{Queue: string(t.Queue), Body: rec.Body, Type: env.Type, CorrelationID: env.CorrelationID,
		TraceHeader: rec.TraceHeader})
	if err != nil {
		err = fmt.Errorf("deadletter: redrive %s: %w", rec.ID, err)
		if rv.Found {
			err = errors.Join(err, r.Jobs.Settle(ctx, env.MessageID, false))
		}
		return out, err
	}
	if rv.Found {
		if err := r.Jobs.Settle(ctx, env.MessageID, true); err != nil {
			return out, err
		}
	}
	if err := r.store.MarkRedriven(ctx, rec.ID); err != nil {
		return out, err
	}
	out.Outcome = Redrove
	return out, nil
}

// letterJob is the job of rec's body: its envelope, or a tick's derived
// envelope (the body is sent back as it is, so a tick goes back as a tick),
// and its registered type. An error matches ErrNotRedrivable: a body that
// is only part of the message's (BodyTruncated) is never sent.
func (r *Redriver) letterJob(rec Record) (message.Envelope, message.JobType, error) {
	if rec.BodyTruncated {
		kept := fmt.Sprintf("%d bytes kept", len(rec.Body))
		if rec.BodyBytes > 0 {
			kept = fmt.Sprintf("%d of its %d bytes kept", len(rec.Body), rec.BodyBytes)
		}
		return message.Envelope{}, message.JobType{}, fmt.Errorf("%w: %s: its body was shortened (%s): "+
			"the whole message is not stored, so it cannot be sent back as it is", ErrNotRedrivable, rec.ID, kept)
	}
	body := []byte(rec.Body)
	env, err := message.Decode(body)
	if err != nil && message.IsTick(body) {
		tick, terr := message.DecodeTick(body)
		if terr != nil {
			return env, message.JobType{}, fmt.Errorf("%w: %s: body is not a valid tick: %w", ErrNotRedrivable, rec.ID, terr)
		}
		if env, err = r.registry.TickEnvelope(tick); err != nil {
			return env, message.JobType{}, fmt.Errorf("%w: %s: tick of schedule %s: %w", ErrNotRedrivable, rec.ID, tick.Schedule, err)
		}
	}
	if err != nil {
		return env, message.JobType{}, fmt.Errorf("%w: %s: body is neither an envelope nor a tick: %w", ErrNotRedrivable, rec.ID, err)
	}
	t, err := r.registry.Lookup(env.Type)
	if err != nil {
		return env, message.JobType{}, fmt.Errorf("%w: %s: %w", ErrNotRedrivable, rec.ID, err)
	}
	return env, t, nil
}

// inspect reads the letter's job; stop reports that out is final (skipped or
// superseded). Without a Jobs port, or without a record, nothing stops it.
func (r *Redriver) inspect(ctx context.Context, jobID string, opts Options, out *Redriven) (rv jobs.Revival, stop bool, err error) {
	if r.Jobs == nil {
		return rv, false, nil
	}
	if rv, err = r.Jobs.Inspect(ctx, jobID); err != nil {
		return rv, true, fmt.Errorf("deadletter: redrive %s: %w", out.ID, err)
	}
	out.JobState, out.SupersededBy = rv.State, rv.SupersededBy
	switch {
	case !rv.Found:
		return rv, false, nil // nothing to keep true: the message alone goes back
	case !rv.Revivable():
		*out = out.skip(fmt.Sprintf("its job is %s", rv.State))
		return rv, true, nil
	case rv.Superseded() && !opts.Force:
		out.Outcome = Superseded
		return rv, true, nil
	}
	return rv, false, nil
}

// recheck reports a letter whose key a newer job took during the redrive.
func (r *Redriver) recheck(ctx context.Context, jobID string, out Redriven) (Redriven, error) {
	rv, err := r.Jobs.Inspect(ctx, jobID)
	if err != nil {
		return out, err
	}
	out.Outcome, out.SupersededBy = Superseded, rv.SupersededBy
	return out, nil
}

func (r Redriven) skip(why string) Redriven {
	r.Outcome, r.Skipped = Skipped, why
	return r
}

// Drop gives up on the dead letter rec: it is marked dropped (kept, with its
// reason, until it expires) and its job reads Failed: a job left Pending by a
// redrive that did not finish is put back to Failed. The job's record says
// its letter was dropped, so the jobs that wait for it under OnSucceeded are
// cancelled. Only a letter in status
// dead is dropped; others are skipped. With opts.DryRun nothing is written.
func (r *Redriver) Drop(ctx context.Context, rec Record, opts Options) (Redriven, error) {
	out := Redriven{ID: rec.ID, Type: rec.Type}
	if rec.Status != StatusDead {
		return out.skip(fmt.Sprintf("it is %s, not dead", rec.Status)), nil
	}
	jobID := rec.JobID
	if r.Jobs != nil && jobID != "" {
		rv, err := r.Jobs.Inspect(ctx, jobID)
		if err != nil {
			return out, fmt.Errorf("deadletter: drop %s: %w", rec.ID, err)
		}
		out.JobState = rv.State
		if rv.State == jobs.StatePending && !opts.DryRun {
			if err := r.Jobs.Settle(ctx, jobID, false); err != nil {
				return out, fmt.Errorf("deadletter: drop %s: %w", rec.ID, err)
			}
		}
	}
	if opts.DryRun {
		out.Outcome = WouldDrop
		return out, nil
	}
	if err := r.store.MarkDropped(ctx, rec.ID); err != nil {
		return out, err
	}
	if r.Jobs != nil && jobID != "" {
		// The job can no longer be redriven: what waits for it under
		// OnSucceeded is cancelled by the continuation sweep. A failure
		// here is said; the drop stands, and dropping again repeats it.
		if err := r.Jobs.MarkDropped(ctx, jobID); err != nil {
			return out, fmt.Errorf("deadletter: drop %s: the letter is dropped, its job not yet marked: %w", rec.ID, err)
		}
	}
	out.Outcome = Dropped
	return out, nil
}
