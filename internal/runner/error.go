package runner

import (
	"context"
	"errors"
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

// ErrBusy is returned for a record whose marker is leased by a concurrent
// twin: it is retried after the visibility timeout, by when the twin has
// claimed (and the retry is a duplicate) or its lease has expired.
var ErrBusy = errors.New("runner: another worker holds the lease")

// isCancellation reports whether err is the context's cancellation or
// deadline: a retry, never a failure.
func isCancellation(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// ErrorClass names the kind of failure for job records and logs, never the
// message itself (which may hold details that do not belong in a table).
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case IsPermanent(err):
		return "permanent"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrBusy):
		return "busy"
	}
	return "transient"
}
