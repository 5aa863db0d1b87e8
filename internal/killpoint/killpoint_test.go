package killpoint_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/vclock"
)

// The release build of a function has no kill hook and no mutation: At is a
// no-op, Mutated is false, and the bootstrap does not even contain the
// variables' names (the virtual clock's too), nor the decorators that make
// the mutations. A chaos build does.
func TestReleaseBuildHasNoHook(t *testing.T) {
	if killpoint.Enabled {
		t.Fatal("the test binary was built with the chaos tag")
	}
	for _, m := range killpoint.Mutations {
		if killpoint.Mutated(m) {
			t.Fatalf("Mutated(%q) in a release build", m)
		}
	}
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tags string
		want bool
	}{{"lambda.norpc", false}, {"lambda.norpc,chaos", true}} {
		out := filepath.Join(t.TempDir(), "bootstrap")
		cmd := exec.Command("go", "build", "-tags", tc.tags, "-o", out, "./functions/email")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %s: %v: %s", tc.tags, err, b)
		}
		bin, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{killpoint.EnvVar, killpoint.MutateEnvVar, vclock.EnvVar, "killpoint.mutatedStore", "killpoint.allOn", "killpoint.pagesOn"} {
			if got := bytes.Contains(bin, []byte(name)); got != tc.want {
				t.Errorf("build with tags %s contains %s: %v; want %v", tc.tags, name, got, tc.want)
			}
		}
	}
}
