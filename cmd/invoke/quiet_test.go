//go:build integration

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// make invoke shows the function's own log lines and its answer, and the
// emulator's lines and the metric documents only with -v.
func TestRunIsQuietUnlessVerbose(t *testing.T) {
	srv := testenv.Moto(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	invoke := func(extra ...string) (stdout, stderr string) {
		t.Helper()
		var out, errs bytes.Buffer
		args := append([]string{"-fn", "enqueue", "-event", "events/enqueue-get-unknown.json", "-endpoint", srv.Endpoint,
			"-stack-name", testenv.Name(t, "inv"), "-state-dir", t.TempDir()}, extra...)
		if err := run(context.Background(), args, &out, &errs); err != nil {
			t.Fatalf("invoke %q: %v\n%s", extra, err, errs.String())
		}
		return out.String(), errs.String()
	}
	emulatorLine := func(s string) bool { return strings.Contains(s, "START RequestId") || strings.Contains(s, "(rapid)") }

	out, errs := invoke()
	if !strings.Contains(out, `"statusCode"`) {
		t.Fatalf("no answer on stdout:\n%s", out)
	}
	if !strings.Contains(errs, `"function":"enqueue"`) || emulatorLine(errs) {
		t.Fatalf("default stderr must hold the function's lines and no emulator line:\n%s", errs)
	}
	if _, errs := invoke("-v"); !emulatorLine(errs) {
		t.Fatalf("-v shows no emulator line:\n%s", errs)
	}
}
