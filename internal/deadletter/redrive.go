package deadletter

import (
	"context"
	"errors"
	"fmt"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/queue"
)

// ErrNotRedrivable is returned (wrapped) for a dead letter that cannot go
// back to a work queue: its body is not an envelope, or names no registered
// type. It stays in the table for a person to read.
var ErrNotRedrivable = errors.New("deadletter: not redrivable")

// Sender sends job messages to the work queues; *queue.Sender is one.
type Sender interface {
	Send(ctx context.Context, m queue.Message) error
}

// RedriveStore is what the redriver needs of the table (*Store is one).
type RedriveStore interface {
	Get(ctx context.Context, id string) (Record, error)
	List(ctx context.Context, status Status) ([]Record, error)
	MarkRedriven(ctx context.Context, id string) error
}

// Redriver sends stored envelopes back to their type's queue under the same
// messageId. That is safe whatever happened before: a job that already
// succeeded is absorbed by its effect marker.
type Redriver struct {
	store    RedriveStore
	sender   Sender
	registry *contract.Registry
}

// NewRedriver returns a redriver over store that sends with sender,
// knowing the job types of registry.
func NewRedriver(store RedriveStore, sender Sender, registry *contract.Registry) *Redriver {
	return &Redriver{store: store, sender: sender, registry: registry}
}

// Redriven is the outcome of redriving one dead letter.
type Redriven struct {
	ID    string         `json:"id"`
	Type  string         `json:"type"`
	Queue contract.Queue `json:"queue,omitempty"`
	// Skipped says why nothing was sent ("" when the envelope was sent).
	Skipped string `json:"skipped,omitempty"`
	// Err is why the redrive failed (RedriveAll only; Redrive returns it).
	Err error `json:"-"`
}

// Redrive sends the dead letter id back to its type's queue with the same
// body (so the same messageId) and the type and correlationId attributes,
// then marks it redriven. A letter whose job already succeeded is skipped.
// It returns an error matching ErrNotFound or ErrNotRedrivable when there is
// nothing it can send.
func (r *Redriver) Redrive(ctx context.Context, id string) (Redriven, error) {
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return Redriven{ID: id}, err
	}
	return r.redrive(ctx, rec)
}

func (r *Redriver) redrive(ctx context.Context, rec Record) (Redriven, error) {
	out := Redriven{ID: rec.ID, Type: rec.Type}
	if rec.Status == StatusSucceeded {
		out.Skipped = "already succeeded"
		return out, nil
	}
	env, err := contract.Decode([]byte(rec.Body))
	if err != nil {
		return out, fmt.Errorf("%w: %s: body is not an envelope: %w", ErrNotRedrivable, rec.ID, err)
	}
	t, err := r.registry.Lookup(env.Type)
	if err != nil {
		return out, fmt.Errorf("%w: %s: %w", ErrNotRedrivable, rec.ID, err)
	}
	out.Type, out.Queue = t.Name, t.Queue
	err = r.sender.Send(ctx, queue.Message{Queue: t.Queue, Body: rec.Body, Type: env.Type, CorrelationID: env.CorrelationID})
	if err != nil {
		return out, fmt.Errorf("deadletter: redrive %s: %w", rec.ID, err)
	}
	// Sent first, marked second: a crash in between leaves it "dead" and a
	// second redrive sends a duplicate, which the marker absorbs.
	if err := r.store.MarkRedriven(ctx, rec.ID); err != nil {
		return out, err
	}
	return out, nil
}

// RedriveAll redrives every dead letter in status dead. Letters that cannot be
// redriven are reported in their Redriven.Err and do not stop the others; the
// error is only for a failure to list.
func (r *Redriver) RedriveAll(ctx context.Context) ([]Redriven, error) {
	recs, err := r.store.List(ctx, StatusDead)
	if err != nil {
		return nil, err
	}
	out := make([]Redriven, 0, len(recs))
	for _, rec := range recs {
		res, err := r.redrive(ctx, rec)
		res.Err = err
		out = append(out, res)
	}
	return out, nil
}
