package exampletest

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// Function is an example's function to run under aws-lambda-rie.
type Function struct {
	// Example is the example's directory under examples/, and the
	// function's name.
	Example string
	// Timeout is the function's timeout; 0 is 30 seconds.
	Timeout time.Duration
	// Env is the function's environment. The SDK's variables, pointing at
	// this test binary's moto server, are added to it.
	Env map[string]string
}

// Start builds fn's bootstrap and starts it under aws-lambda-rie against
// moto, its output logged through t; it is stopped when t ends.
func Start(ctx context.Context, t testing.TB, fn Function) *lambdarie.Emulator {
	t.Helper()
	env := map[string]string{
		"AWS_ENDPOINT_URL": testenv.Moto(t).Endpoint, "AWS_REGION": testenv.Region,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	}
	maps.Copy(env, fn.Env)
	timeout := fn.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	var rie, bin string
	root, err := testenv.RepoRoot()
	if err == nil {
		rie, err = lambdarie.Binary(root)
	}
	if err == nil {
		bin, err = lambdarie.Build(ctx, root, "examples/"+fn.Example, filepath.Join(t.TempDir(), "bootstrap"))
	}
	if err != nil {
		t.Fatal(err)
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{
		RIE: rie, Bootstrap: bin, FunctionName: fn.Example, Timeout: timeout, Output: testWriter{t}, Env: env,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Stop)
	return em
}

// Markers creates a markers table in moto, named after the example, and
// returns its name.
func Markers(t testing.TB, example string) string {
	t.Helper()
	return testenv.NewTable(t, testenv.DynamoDB(t), example+"-markers", "HandlerName", "MessageKey")
}

// Invoke invokes the function with event, as it is written, and returns
// its answer.
func Invoke(ctx context.Context, t testing.TB, em *lambdarie.Emulator, event []byte) []byte {
	t.Helper()
	out, err := em.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	return out
}

// InvokeBatch invokes the function with event, as it is written, and
// returns the identifiers of the items it reports failed: message ids, or
// sequence numbers.
func InvokeBatch(ctx context.Context, t testing.TB, em *lambdarie.Emulator, event []byte) []string {
	t.Helper()
	out := Invoke(ctx, t, em, event)
	ids, err := batchFailures(out)
	if err != nil {
		t.Fatalf("invoke answered %s: %v", out, err)
	}
	return ids
}

// Marshal is v in JSON, to invoke a function with.
func Marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testWriter logs the emulator's output through t.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
