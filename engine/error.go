package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// PermanentError marks a failure that no retry can fix (bad input, a state
// that will not change). The runner sends the message straight to the
// dead-letter queue with the reason instead of retrying it. Match it with
// errors.As.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// NoOpError is what a handler returns when the work turned out unnecessary
// (the user was deleted, the address is already confirmed): a successful
// job that did nothing. The runner claims its marker like any success,
// counts it as skipped, and records the reason on the job record, so GET
// shows why nothing happened. Create it with NoOp.
type NoOpError struct {
	Reason string
	// Kind names the reason in the JobsNoop metric's reason dimension: a
	// short fixed name ("user-not-found"), "other" when empty.
	Kind string
}

func (e *NoOpError) Error() string { return "no work needed: " + e.Reason }

// NoOp reports that the job needs no work, and why ("no mail needed: user
// not found"). The reason is stored and shown: IDs only, no personal data.
func NoOp(reason string) error { return &NoOpError{Reason: reason} }

// NoOpKind is NoOp with the kind of reason the JobsNoop metric counts it
// under (e.g. "user-not-found": an alarm watches the share of a type's jobs
// that end so).
func NoOpKind(kind, reason string) error { return &NoOpError{Reason: reason, Kind: kind} }

// ErrBusy is returned for a record whose marker is leased by a concurrent
// twin: it is retried after the visibility timeout, by when the twin has
// claimed (and the retry is a duplicate) or its lease has expired.
var ErrBusy = errors.New("runner: another worker holds the lease")

// PanicError is the error of a handler (or a runner step) that panicked. The
// runner recovers it, so one bad record never takes its batch down: the
// record is retried like any transient failure, and on its final attempt the
// job reads Failed. Value is the panic's text when it is a runtime error,
// else only its Go type (a panic value may quote personal data).
type PanicError struct {
	Value string
}

func (e *PanicError) Error() string { return "panic: " + e.Value }

// panicText is what may be said of a recovered panic value outside the
// process.
func panicText(v any) string {
	switch v := v.(type) {
	case runtime.Error:
		return v.Error()
	case error:
		return Redact(v)
	}
	return fmt.Sprintf("a value of type %T", v)
}

// isCancellation reports whether err is the context's cancellation or
// deadline: a retry, never a failure.
func isCancellation(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// ErrorClass names the kind of failure for job records, logs and metrics,
// with the provider's error code when there is one ("transient
// ThrottlingException", "permanent MessageRejected"), never the message
// itself. A message that cannot be understood (malformed, an unknown type,
// invalid args) is "validation"; a lease taken over by a twin is
// "lease-lost".
func ErrorClass(err error) string {
	class := "transient"
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrUnknownType):
		return "validation"
	case IsPermanent(err):
		class = "permanent"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrBusy):
		return "busy"
	case errors.As(err, new(*PanicError)):
		return "panic"
	case errors.Is(err, ErrLeaseLost):
		return "lease-lost"
	}
	if code := ErrorCode(err); code != "" {
		return class + " " + code
	}
	return class
}

// PermanentClass is the class of an error that ended a job for good (it was
// dead-lettered): ErrorClass, except that what ErrorClass would call
// transient (or a deadline, a cancellation) is "permanent" here — a
// dead-lettered record is never retried, whatever its cause looked like.
func PermanentClass(err error) string {
	switch class := ErrorClass(err); {
	case err == nil:
		return ""
	case class == "validation", strings.HasPrefix(class, "permanent"):
		return class
	}
	return ErrorClass(Permanent(err))
}

// ErrMalformed is what a record the runner refuses before its work wraps:
// a body its kind's decode refuses, or a payload without a key. Its class
// is "validation".
var ErrMalformed = errors.New("malformed")

// ErrUnknownType is what a record wraps whose route no kind of the Mux
// handles. Its class is "validation".
var ErrUnknownType = errors.New("unknown job type")

// malformed marks err as a record refused before its work (no route, a
// body its kind does not decode, no key): its class is "validation". An
// error that already says so is kept as it is.
func malformed(err error) error {
	if errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownType) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}
