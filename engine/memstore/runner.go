package memstore

import (
	"context"
	"errors"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// NewRunner returns a runner with what a first program, a test or a
// local run needs and cfg leaves out: a marker store in memory (New), a
// kill switch that answers each type's default (its EnabledByDefault), and
// a park that retries (the record goes back to its queue as a batch item
// failure rather than being re-sent with a delay). A Registry and Handlers
// are all it requires. engine.New, which a production function calls,
// keeps requiring every adapter: these defaults hold nothing across
// invocations.
func NewRunner(cfg engine.Config) (*engine.Runner, error) {
	if cfg.Markers == nil {
		cfg.Markers = New()
	}
	if cfg.Switch == nil {
		cfg.Switch = Defaults{}
	}
	if cfg.Parker == nil {
		cfg.Parker = RetryParker{}
	}
	return engine.New(cfg)
}

// Defaults is the kill switch that answers each type's default: on for a
// type EnabledByDefault, off (fail-closed) for the others.
type Defaults struct{}

// IsJobEnabled answers def, the type's EnabledByDefault.
func (Defaults) IsJobEnabled(_ context.Context, _ string, def bool) bool { return def }

// ErrNotParked is RetryParker's answer: the job is retried by its queue.
var ErrNotParked = errors.New("memstore: no parker; the job is retried by its queue")

// RetryParker parks nothing: its Park fails, so the runner reports the
// record for retry and the queue delivers it again after its visibility
// timeout.
type RetryParker struct{}

// Park returns ErrNotParked.
func (RetryParker) Park(context.Context, engine.Queue, engine.Envelope, string, time.Duration) error {
	return ErrNotParked
}
