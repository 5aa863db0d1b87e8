package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

// notifyArgs is the typed args of the notify fixture type.
type notifyArgs struct {
	UserID string `arg:"userId"`
	Note   string // no tag: left alone
}

// TestTypedDecodesTheArgs: a Typed handler gets the envelope's args in its
// struct.
func TestTypedDecodesTheArgs(t *testing.T) {
	var got notifyArgs
	h := testkit.NewHarness(t, registry(t, true), map[string]runner.Handler{
		notify.Name: runner.Typed(func(_ context.Context, _ runner.Job, a notifyArgs) error { got = a; return nil }),
	}, nil)
	env := testkit.Envelope(notify.Name, map[string]string{"userId": "u-42"})
	if retried := h.Run(t, testkit.Record(t, env, 1)); len(retried) != 0 {
		t.Fatalf("retried %v", retried)
	}
	if got != (notifyArgs{UserID: "u-42"}) {
		t.Fatalf("handler got %+v; want UserID u-42", got)
	}
}

// TestTypedIsCheckedAgainstTheDeclaration: New refuses a Typed handler
// whose struct disagrees with its type's declared args.
func TestTypedIsCheckedAgainstTheDeclaration(t *testing.T) {
	type missing struct {
		Other string `arg:"other"`
	}
	type extra struct {
		UserID string `arg:"userId"`
		Other  string `arg:"other"`
	}
	type notString struct {
		UserID int `arg:"userId"`
	}
	type twice struct {
		A string `arg:"userId"`
		B string `arg:"userId"`
	}
	for _, tc := range []struct {
		name    string
		handler runner.Handler
		want    string // "" = accepted
	}{
		{"matching", runner.Typed(func(context.Context, runner.Job, notifyArgs) error { return nil }), ""},
		{"a declared arg without a field", runner.Typed(func(context.Context, runner.Job, missing) error { return nil }), `declares arg "userId"`},
		{"a field for an undeclared arg", runner.Typed(func(context.Context, runner.Job, extra) error { return nil }), `arg "other"`},
		{"a field that is no string", runner.Typed(func(context.Context, runner.Job, notString) error { return nil }), "exported string"},
		{"an arg tagged twice", runner.Typed(func(context.Context, runner.Job, twice) error { return nil }), "used twice"},
		{"not a struct", runner.Typed(func(context.Context, runner.Job, string) error { return nil }), "want a struct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runner.New(runner.Config{Registry: registry(t, true), Handlers: map[string]runner.Handler{notify.Name: tc.handler},
				Switch: &testkit.Switches{}, Markers: memstore.New(), Parker: &testkit.Queues{}})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New = %v; want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v; want an error saying %q", err, tc.want)
			}
		})
	}
}
