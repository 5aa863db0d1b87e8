package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RunOutsideModule writes files (name to content) as the module named
// module in a directory of its own, requiring this repository's module
// through a replace directive to root (the checkout), and returns what
// `go run .` prints there after `go mod tidy`: a program outside the module
// can only name its public packages, so this proves they serve it.
func RunOutsideModule(t testing.TB, root, module string, files map[string]string) string {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files["go.mod"] = "module " + module + "\n\ngo 1.26\n\nrequire github.com/runstwice/runstwice v0.0.0\n\nreplace github.com/runstwice/runstwice => " + root + "\n"
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	return run("run", ".")
}
