package runner

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/runstwice/runstwice/message"
)

// Typed returns a Handler whose job args arrive decoded into T: a struct
// whose string fields name the args they carry with the tag `arg:"name"`.
// New checks T against the job type's declaration: every tagged field names
// a declared arg and every declared arg has a field, so a renamed or
// forgotten arg is refused at start-up, not found in production. Fields
// without the tag are left alone.
//
// The args were validated against the declaration (formats, sizes,
// required) before the handler runs; an optional arg that is absent leaves
// its field empty.
func Typed[T any](fn func(ctx context.Context, job Job, args T) error) Handler {
	h := &typedHandler[T]{fn: fn}
	h.fields, h.err = argFields(reflect.TypeFor[T]())
	return h
}

// typedHandler is the Handler Typed makes.
type typedHandler[T any] struct {
	fn func(ctx context.Context, job Job, args T) error
	// fields maps an arg name to its field's index in T.
	fields map[string]int
	err    error // T is not a struct of string fields
}

// Handle decodes the job's args into a T and calls the function.
func (h *typedHandler[T]) Handle(ctx context.Context, job Job) error {
	var args T
	v := reflect.ValueOf(&args).Elem()
	for name, i := range h.fields {
		v.Field(i).SetString(job.Envelope.Args[name])
	}
	return h.fn(ctx, job, args)
}

// checkArgs reports how T disagrees with the declaration of t.
func (h *typedHandler[T]) checkArgs(t message.JobType) error {
	if h.err != nil {
		return h.err
	}
	var declared []string
	for _, a := range t.Args {
		declared = append(declared, a.Name)
		if _, ok := h.fields[a.Name]; !ok {
			return fmt.Errorf("%s declares arg %q; %s has no field tagged arg:%q", t.Name, a.Name, reflect.TypeFor[T](), a.Name)
		}
	}
	for name := range h.fields {
		if !slices.Contains(declared, name) {
			return fmt.Errorf("%s has a field for arg %q, which %s does not declare", reflect.TypeFor[T](), name, t.Name)
		}
	}
	return nil
}

// argFields maps the arg tags of struct type t to their field indices.
func argFields(t reflect.Type) (map[string]int, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("typed args %s: want a struct of string fields", t)
	}
	fields := make(map[string]int)
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("arg")
		if !ok {
			continue
		}
		switch _, dup := fields[name]; {
		case f.Type.Kind() != reflect.String || !f.IsExported():
			return nil, fmt.Errorf("typed args %s: field %s (arg %q) must be an exported string", t, f.Name, name)
		case name == "" || dup:
			return nil, fmt.Errorf("typed args %s: field %s: arg name %q is empty or used twice", t, f.Name, name)
		}
		fields[name] = i
	}
	return fields, nil
}

// argsChecker is a Handler that knows the args it expects (Typed).
type argsChecker interface {
	checkArgs(t message.JobType) error
}
