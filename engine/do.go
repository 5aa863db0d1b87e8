package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrInProgress is what Do returns while another call holds the key: its
// function is running. Match it with errors.Is; the error is an
// *InProgressError that says until when the other call holds it.
var ErrInProgress = errors.New("engine: another call holds the key")

// InProgressError is ErrInProgress with the end of the other call's lease:
// a caller may come back then (an HTTP Retry-After).
type InProgressError struct {
	Key   string
	Until time.Time
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("%s: key %q, until %s", ErrInProgress, e.Key, e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrInProgress) hold.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// ErrResultTooLarge is what Do returns when a result's JSON is larger than
// MaxResultBytes: the call's function ran and its result is returned with
// the error, but it cannot be kept, so a repeat of the call gets this error
// too (never the function run again, never a silent loss).
var ErrResultTooLarge = errors.New("engine: the result is too large to keep")

// ErrNotKept is what Do returns, with the result, when the function ran but
// its result could not be written: a repeat after the call's lease ends
// runs the function again.
var ErrNotKept = errors.New("engine: the result could not be kept")

// MaxResultBytes bounds the JSON of a result Do keeps: a DynamoDB item
// holds at most 400 KB, the marker's own attributes included.
const MaxResultBytes = 350 * 1024

// DoOption sets how Do runs a call.
type DoOption func(*doConfig)

type doConfig struct {
	fingerprint string
	lease       time.Duration
	retention   time.Duration
	now         func() time.Time
	replayed    *bool
}

// WithFingerprint keeps b's SHA-256 with the key: a later call with the
// same key and another fingerprint gets ErrFingerprint, and its function
// never runs.
func WithFingerprint(b []byte) DoOption {
	return func(c *doConfig) {
		sum := sha256.Sum256(b)
		c.fingerprint = hex.EncodeToString(sum[:])
	}
}

// WithLease sets how long the call holds the key while its function runs
// (default: until the context's deadline, else DefaultLease). A call that
// runs longer can be taken over, and then never overwrites its
// successor's result.
func WithLease(d time.Duration) DoOption { return func(c *doConfig) { c.lease = d } }

// WithRetention sets how long the result is kept and replayed (default
// DefaultRetention). The function may keep it longer still with
// KeepUntil.
func WithRetention(d time.Duration) DoOption { return func(c *doConfig) { c.retention = d } }

// WithClock sets the clock the call's lease and expiry are counted on
// (time.Now if nil): a store with a clock of its own (a test's) needs the
// same.
func WithClock(now func() time.Time) DoOption { return func(c *doConfig) { c.now = now } }

// WithReplayed sets *replayed to whether the call's result was a stored
// one (its function did not run).
func WithReplayed(replayed *bool) DoOption { return func(c *doConfig) { c.replayed = replayed } }

// doKey carries a call's state in its function's context (KeepUntil).
type doKey struct{}

type doState struct{ until time.Time }

// KeepUntil, called by a function Do runs with ctx, keeps its result at
// least its retention past t (a result about a job due at t outlives the
// job's last delivery). Outside Do it does nothing.
func KeepUntil(ctx context.Context, t time.Time) {
	if s, ok := ctx.Value(doKey{}).(*doState); ok && t.After(s.until) {
		s.until = t
	}
}

// Do runs fn once per name and key, and keeps its result (as JSON) with
// the key's marker in store:
//   - the first call runs fn and keeps its result;
//   - a later call with the same name and key returns the kept result
//     without running fn (WithReplayed reports it);
//   - a call while another holds the key returns an *InProgressError
//     (errors.Is(err, ErrInProgress));
//   - WithFingerprint set and different from the kept one: ErrFingerprint;
//   - an fn error keeps nothing: the next call runs fn again.
//
// The kept write and the release of the key are conditional on this
// call's lease: a call whose lease ran out, and which another call took
// over, can never overwrite that call's result. A first call costs one
// read and two writes (the lease, the result), a replay one read.
func Do[R any](ctx context.Context, store Store, name, key string, fn func(context.Context) (R, error), opts ...DoOption) (R, error) {
	var zero R
	c := doConfig{retention: DefaultRetention, now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case name == "" || key == "":
		return zero, errors.New("engine: Do needs a name and a key")
	case len(name)+len(key) > MaxKeyBytes:
		return zero, fmt.Errorf("engine: Do: the name and key are %d bytes; at most %d", len(name)+len(key), MaxKeyBytes)
	}
	if c.replayed != nil {
		*c.replayed = false
	}
	k := Key{Type: name, JobID: key}
	seen, err := store.PeekBatch(ctx, []Key{k})
	if err != nil {
		return zero, fmt.Errorf("engine: Do: read %s: %w", name, err)
	}
	if r, ok := seen[k]; ok && (r.Settled() || r.LeaseActive(c.now())) {
		return answer[R](r, key, c)
	}
	owner := uuid.NewString()
	until := c.now().Add(DefaultLease)
	if d, ok := ctx.Deadline(); ok {
		until = d
	}
	if c.lease > 0 {
		until = c.now().Add(c.lease)
	}
	r, err := store.Lease(ctx, k, Mark{Owner: owner, Until: until, Expires: until.Add(c.retention), Fingerprint: c.fingerprint})
	switch {
	case errors.Is(err, ErrLeaseHeld), errors.Is(err, ErrProcessed), errors.Is(err, ErrCancelled), errors.Is(err, ErrFailed):
		return answer[R](r, key, c)
	case err != nil:
		return zero, fmt.Errorf("engine: Do: lease %s: %w", name, err)
	}
	state := &doState{}
	wctx := context.WithoutCancel(ctx) // fn has run: its outcome is written whatever ctx does now
	v, err := runHolding(ctx, state, fn, func() { _ = store.Release(wctx, k, owner) })
	if err != nil {
		_ = store.Release(wctx, k, owner) // best effort: the lease ends by itself
		return v, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		_ = store.Release(wctx, k, owner)
		return v, fmt.Errorf("engine: Do: encode the result of %s: %w", name, err)
	}
	mark := Mark{Owner: owner, Expires: SettledUntil(c.now(), state.until, c.retention), Fingerprint: c.fingerprint, Result: b}
	tooLarge := len(b) > MaxResultBytes
	if tooLarge {
		mark.Result = nil // done, never run again, and said so
	}
	if _, err := store.Claim(wctx, k, mark); err != nil && !errors.Is(err, ErrLeaseLost) {
		return v, fmt.Errorf("%w: %s: %w", ErrNotKept, name, err)
	}
	// A lost lease, or a claim that found another call's: that call's
	// result is the one kept, and this call's stands for its caller.
	if tooLarge {
		return v, fmt.Errorf("%w: %s: %d bytes, at most %d", ErrResultTooLarge, name, len(b), MaxResultBytes)
	}
	return v, nil
}

// runHolding runs fn with state in its context; a panic in fn releases the
// key (release) before it goes on up, so the next call need not wait for
// the lease to run out.
func runHolding[R any](ctx context.Context, state *doState, fn func(context.Context) (R, error), release func()) (R, error) {
	defer func() {
		if v := recover(); v != nil {
			release()
			panic(v)
		}
	}()
	return fn(context.WithValue(ctx, doKey{}, state))
}

// answer is what a call gets from the marker r another call left: its
// kept result, ErrFingerprint, or ErrInProgress.
func answer[R any](r Record, key string, c doConfig) (R, error) {
	var zero R
	switch {
	case c.fingerprint != "" && r.Fingerprint != "" && r.Fingerprint != c.fingerprint:
		return zero, fmt.Errorf("%w: key %q of %s", ErrFingerprint, key, r.Key.Type)
	case r.State == StateLeased:
		return zero, &InProgressError{Key: key, Until: r.LeaseUntil}
	case r.State == StateCancelled:
		return zero, fmt.Errorf("%w: key %q of %s", ErrCancelled, key, r.Key.Type)
	case r.State == StateFailed:
		return zero, fmt.Errorf("%w: key %q of %s", ErrFailed, key, r.Key.Type)
	case r.Result == nil:
		return zero, fmt.Errorf("%w: the first call of key %q of %s ran, and its result could not be kept", ErrResultTooLarge, key, r.Key.Type)
	}
	var v R
	if err := json.Unmarshal(r.Result, &v); err != nil {
		return zero, fmt.Errorf("engine: Do: the kept result of key %q of %s does not decode: %w", key, r.Key.Type, err)
	}
	if c.replayed != nil {
		*c.replayed = true
	}
	return v, nil
}
