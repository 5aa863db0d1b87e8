package message

import (
	"fmt"
	"strings"

	"github.com/runstwice/runstwice/engine"
)

// ErrMalformed is matched (errors.Is) by every error that says a message or
// request cannot be understood: bad JSON, unknown fields, wrong types,
// oversize, bad version. Such a message can never succeed by retrying. It
// is the engine's own, so a runner classes these errors "validation".
var ErrMalformed = engine.ErrMalformed

// ErrUnknownType is matched (errors.Is) when a job type is not registered
// (the engine's own, as ErrMalformed is).
var ErrUnknownType = engine.ErrUnknownType

// FieldError names one field that failed validation and why.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// ValidationError lists every field that failed validation. It matches
// ErrMalformed.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string { return "invalid: " + e.Detail() }

// Detail lists every field and why, for a person: "args.userId: is
// required; key: must be a string".
func (e *ValidationError) Detail() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Reason
	}
	return strings.Join(parts, "; ")
}

// Is reports that a ValidationError is a malformed input.
func (e *ValidationError) Is(target error) bool { return target == ErrMalformed }

func (e *ValidationError) add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// orNil returns nil when no field failed, else the error. A checker
// collects into a ValidationError value and calls orNil last, so a valid
// input allocates no error.
func (e *ValidationError) orNil() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: e.Fields}
}

// UnknownTypeError names the type that is not registered. It matches
// ErrUnknownType.
type UnknownTypeError struct {
	Type string
}

func (e *UnknownTypeError) Error() string { return fmt.Sprintf("unknown job type %q", e.Type) }

// Is reports that an UnknownTypeError is ErrUnknownType.
func (e *UnknownTypeError) Is(target error) bool { return target == ErrUnknownType }
