package stack

import (
	"path/filepath"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/message"
)

// RepoTemplate loads the repository's template.yaml, found from the
// working directory up (as a test runs), failing t if it cannot.
func RepoTemplate(t testing.TB) *Template {
	t.Helper()
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// CheckWorker fails t with each of WorkerProblems for the worker function
// in dir ("functions/email"), on the repository's template.yaml and the
// bundle's job types: a worker main's test.
func CheckWorker(t testing.TB, dir string, consumes []message.Queue, handles func(string) bool) {
	t.Helper()
	for _, p := range RepoTemplate(t).WorkerProblems(dir, consumes, contract.Types(), handles) {
		t.Error(p)
	}
}
