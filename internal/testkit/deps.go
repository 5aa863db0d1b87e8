package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps is `go list -deps` of the packages args name (flags such as -tags
// first), run in the test's package directory: every import path the
// build links, the standard library included. It fails t when go list
// fails or lists suspiciously little.
func Deps(t testing.TB, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s listed only %v", strings.Join(args, " "), deps)
	}
	return deps
}
