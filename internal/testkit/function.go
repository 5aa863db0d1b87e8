package testkit

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/obs"
)

// BuildFunc is a function main's build, as internal/function.Main calls
// it: the handler from the environment, or why the function cannot start.
type BuildFunc[H any] func(ctx context.Context, log *slog.Logger) (H, error)

// AWSEnv is the region and the fake credentials a function's build reads
// (no build calls AWS at start).
func AWSEnv() map[string]string {
	return map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
}

// Blank returns each of names set to "": a variable a test unsets.
func Blank(names ...string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = ""
	}
	return out
}

// Setenv sets every variable of each of envs, later ones winning, for the
// rest of the test.
func Setenv(t testing.TB, envs ...map[string]string) {
	t.Helper()
	all := map[string]string{}
	for _, env := range envs {
		maps.Copy(all, env)
	}
	for k, v := range all {
		t.Setenv(k, v)
	}
}

// MustBuild sets envs (Setenv) and builds, failing t if the function
// refuses to start.
func MustBuild[H any](t testing.TB, build BuildFunc[H], envs ...map[string]string) H {
	t.Helper()
	Setenv(t, envs...)
	h, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return h
}

// Refuses sets env and fails t unless build refuses to start with one
// error that names every one of names: a misconfigured function says all
// that is wrong at once.
func Refuses[H any](t testing.TB, build BuildFunc[H], env map[string]string, names ...string) {
	t.Helper()
	Setenv(t, env)
	_, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
	if err == nil {
		t.Fatal("built without configuration")
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %s", err, n)
		}
	}
}

// NeedsEach fails t unless build refuses to start, naming the variable,
// with any one of required unset (each in a subtest), and then builds with
// them all set; it returns what that built. base is set in every case.
func NeedsEach[H any](t *testing.T, build BuildFunc[H], required, base map[string]string) H {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(required)) {
		t.Run(name, func(t *testing.T) {
			Refuses(t, build, With(With(base, required), Blank(name)), name)
		})
	}
	return MustBuild(t, build, base, required)
}
