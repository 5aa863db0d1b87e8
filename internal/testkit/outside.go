package testkit

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Modules maps each module of this repository to its directory in the
// checkout: the bundle at the root, the library's modules beside it.
var Modules = map[string]string{
	"github.com/runstwice/runstwice":                 ".",
	"github.com/runstwice/runstwice/engine":          "engine",
	"github.com/runstwice/runstwice/aws/dynamostore": "aws/dynamostore",
	"github.com/runstwice/runstwice/aws/sqsqueue":    "aws/sqsqueue",
	"github.com/runstwice/runstwice/aws/ssmswitch":   "aws/ssmswitch",
}

// Outside is a module outside this repository, in a directory of its own,
// that requires some of the repository's modules as a Go team's would: by
// version, with replace lines to the checkout in place of a download.
type Outside struct {
	t   testing.TB
	Dir string
}

// NewOutside writes files (name to content) as the module named module,
// requiring the repository's modules named in requires (replace lines for
// every one of them point at root, the checkout), and runs `go mod tidy`
// there, outside any workspace.
func NewOutside(t testing.TB, root, module string, files map[string]string, requires ...string) *Outside {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	o := &Outside{t: t, Dir: t.TempDir()}
	var mod strings.Builder
	mod.WriteString("module " + module + "\n\ngo 1.26\n\nrequire (\n")
	for _, r := range requires {
		mod.WriteString("\t" + r + " v0.5.0\n")
	}
	mod.WriteString(")\n\nreplace (\n")
	for _, path := range slices.Sorted(maps.Keys(Modules)) {
		mod.WriteString("\t" + path + " => " + filepath.Join(root, Modules[path]) + "\n")
	}
	mod.WriteString(")\n")
	files["go.mod"] = mod.String()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(o.Dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o.Go("mod", "tidy")
	return o
}

// Go runs the go command with args in the module and returns what it
// printed; it fails the test when the command fails.
func (o *Outside) Go(args ...string) string {
	o.t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		o.t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// SumLines is how many lines the module's go.sum has: what a team that
// imports the same packages downloads and verifies.
func (o *Outside) SumLines() int {
	o.t.Helper()
	b, err := os.ReadFile(filepath.Join(o.Dir, "go.sum"))
	if err != nil {
		o.t.Fatal(err)
	}
	return len(strings.Split(strings.TrimSpace(string(b)), "\n"))
}

// RunOutsideModule writes files as the module named module, requiring
// this repository's root module (replaced by the checkout at root), and
// returns what `go run .` prints there after `go mod tidy`: a program
// outside the module can only name its public packages, so this proves
// they serve it.
func RunOutsideModule(t testing.TB, root, module string, files map[string]string) string {
	t.Helper()
	return NewOutside(t, root, module, files, "github.com/runstwice/runstwice").Go("run", ".")
}
