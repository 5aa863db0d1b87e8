package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runTwiceSnippet finds the walk-through's Go block that calls
// testkit.RunTwice (the tour's "Add a job type").
var runTwiceSnippet = regexp.MustCompile("(?s)```go\n(testkit\\.RunTwice\\(t, testkit\\.Case\\{.*?\\n\\}\\))\n```")

// The walk-through's strict RunTwice snippet compiles against the test kit
// as it is (a renamed field, or ExactlyOnce gone, fails it), and is strict.
func TestREADMERunTwiceSnippetCompiles(t *testing.T) {
	r := root(t)
	m := runTwiceSnippet.FindStringSubmatch(walkText(t))
	if m == nil {
		t.Fatalf("no page of %q has a ```go block calling testkit.RunTwice(t, testkit.Case{…})", walkThrough)
	}
	snippet := m[1]
	if !strings.Contains(snippet, "ExactlyOnce: true") {
		t.Fatalf("the walk-through's RunTwice snippet is not strict (ExactlyOnce: true):\n%s", snippet)
	}
	// A package inside the module, so it builds offline against the code
	// as it is; removed afterwards.
	dir, err := os.MkdirTemp(filepath.Join(r, "internal", "docs"), "snippet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	src := `package snippet_test

import (
	"context"
	"testing"

	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// What the snippet names: a job type of the reader's own
// package, its handler, and the effects it counts.
var (
	billing = struct{ InvoiceReady message.JobType }{}
	handler = runner.HandlerFunc(func(context.Context, runner.Job) error { return nil })
	sent    = map[string]int{}
)

func TestSnippet(t *testing.T) {
` + snippet + `
}
`
	if err := os.WriteFile(filepath.Join(dir, "snippet_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
	cmd.Dir = filepath.Join(r, "internal", "docs")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the walk-through's RunTwice snippet does not compile: %v\n%s\n%s", err, out, snippet)
	}
}
